"""The auth scenarios as a person meets them: `python -m conformance.user <server-url>`.

An admin writes the scenario's server into a servers file, runs `nerve connect conformance` (the
browser step is `conformance.browser`, the BROWSER `conformance.run` sets), then someone asks nerve a
question with `nerve ask`. The model is a scripted one on this machine: it calls the tools the plan
names (`conformance.plans`) as the tools nerve offers it, then answers with what the calls returned,
so the person reads the outcome. When that answer says an admin must run `nerve connect` (a server
that asked for more access on a call), the admin does so and the question is asked again, once: a
person gives up after that.

Both commands are nerve's own CLI, in processes of their own, sharing one store as a deployment's
commands do. Exit code 0 when the last question's calls went as a model's calls should.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.mcp.auth.vault import new_secret_key
from bot.types import ToolSpec
from conformance.client import SERVER, auth_of
from conformance.plans import plan
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Reply, Step, reply

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Use the conformance server's tools, please."
# What an answer says when an admin has to sign nerve in again.
RECONNECT = f"nerve connect {SERVER}"
# `nerve connect` waits for the browser; `nerve ask` for the calls (`conformance.run` gives the
# whole run 180 s).
COMMAND_TIMEOUT = 40.0
FAILED_CALL = "The tool call failed"


class ScriptedModel:
    """Answers a question by calling the plan's rounds, then by quoting what the calls returned."""

    def __init__(self, scenario: str, context: dict[str, Any]) -> None:
        self._scenario = scenario
        self._context = context

    def __call__(self, body: dict[str, Any]) -> Step:
        messages = body.get("messages") or []
        tools = [_spec(tool) for tool in body.get("tools") or []]
        rounds = plan(self._scenario, self._context, tools)
        done = len([message for message in messages if message.get("tool_calls")])
        if done < len(rounds):
            calls = tuple(
                FakeCall(name=call.tool, arguments=json.dumps(call.arguments)) for call in rounds[done]
            )
            return Reply(tool_calls=calls)
        results = [str(message.get("content")) for message in messages if message.get("role") == "tool"]
        return reply("\n".join(results) or "no tools were called")


def _spec(tool: dict[str, Any]) -> ToolSpec:
    function = tool.get("function") or {}
    name = str(function.get("name"))
    return ToolSpec(
        name=name,
        description=str(function.get("description") or ""),
        parameters=dict(function.get("parameters") or {}),
        server=SERVER,
        original_name=name,
    )


def servers_file(folder: Path, url: str, scenario: str, context: dict[str, Any]) -> Path:
    """The scenario's server as an admin writes it: its sign-in, and calls that need no approval.
    The suite's authorization server listens on another port of this machine, hence
    allowPrivateNetwork (the server's own address, written as is, would not need it)."""
    auth = auth_of(scenario, context)
    assert auth is not None
    entry = {
        "url": url,
        "allowPrivateNetwork": True,
        "approval": "never",
        "auth": auth.model_dump(by_alias=True, exclude_none=True),
    }
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {SERVER: entry}}))
    return path


async def nerve(args: Sequence[str], env: dict[str, str]) -> tuple[int, str]:
    """Run one nerve command as a person would; its exit code and what it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "adapters",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        async with asyncio.timeout(COMMAND_TIMEOUT):
            out, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        return 124, f"nerve {args[0]} did not finish within {COMMAND_TIMEOUT:g} s"
    text = out.decode(errors="replace")
    print(f"$ nerve {' '.join(args)}  (exit {process.returncode})\n{text}", flush=True)
    assert process.returncode is not None
    return process.returncode, text


async def main(url: str, scenario: str, context: dict[str, Any]) -> int:
    with tempfile.TemporaryDirectory(prefix="nerve-conformance-") as folder:
        async with FakeLLMServer(ScriptedModel(scenario, context), strict=False) as model:
            env = {
                **os.environ,
                "NERVE_SECRET_KEY": new_secret_key(),
                "NERVE_DB": str(Path(folder) / "nerve.db"),
                "NERVE_MCP_CONFIG": str(servers_file(Path(folder), url, scenario, context)),
                "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "conformance",
                "NERVE_MODEL": "test-model",
                # Where people's browsers would come back to a deployed nerve (unused here: the
                # admin signs in at the terminal).
                "NERVE_PUBLIC_URL": "https://nerve.example",
            }
            for attempt in range(2):
                code, _ = await nerve(["connect", SERVER], env)
                if code != 0:
                    return code
                code, answer = await nerve(["ask", "--yes", QUESTION], env)
                if RECONNECT not in answer or attempt == 1:
                    return 1 if code != 0 or RECONNECT in answer or FAILED_CALL in answer else 0
    return 1


def cli(argv: Sequence[str]) -> int:
    if not argv:
        print("usage: python -m conformance.user <server-url>", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    return asyncio.run(main(argv[-1], scenario, context))


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
