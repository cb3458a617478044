"""Live answers: how soon after the model's first token its words are visible to the person asking.

Terminal: a real `nerve ask` process (`python -m bot ask …`, stdout a pipe) is pointed with
OPENAI_BASE_URL at a streaming model on 127.0.0.1 that waits `FIRST_TOKEN_DELAY` before its first
token, then sends `TOKENS` tokens `TOKEN_DELAY` apart. The model notes when it wrote the first
token; the benchmark notes when the first byte of the answer arrived on nerve's stdout; both clocks
are this process's. The figure is the difference, over `RUNS` runs. Goal: at most `GOAL_MS`.

Slack: `bench/slack_stream_bench.py` takes the same model through the real Slack adapter against the
fake Slack Web API, with Slack's streaming messages and without them (one message edited in place);
its figures join these under `slack`, judged here against the goals: first text within `GOAL_MS`,
at most `MAX_SLACK_CALLS` Slack calls for the answer, exactly one final message.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from bench import slack_stream_bench

ROOT = Path(__file__).resolve().parent.parent
FIRST_TOKEN_DELAY = 0.8
TOKENS = 40
TOKEN_DELAY = 0.02
RUNS = 5
GOAL_MS = 150.0
MAX_SLACK_CALLS = 12
# One process must start, answer and exit within this; a run that takes longer fails the suite.
RUN_TIMEOUT = 60.0
# Tokens as a tokenizer cuts them: the space goes with the word after it.
WORDS = [f"{' ' if i else ''}word{i:02d}" for i in range(TOKENS)]
ANSWER = "".join(WORDS)


class PacedModel:
    """A streaming chat-completions endpoint on loopback that notes when each answer's first token left."""

    def __init__(self) -> None:
        self.first_token_at: list[float] = []
        self.last_token_at: list[float] = []
        self._runner: web.AppRunner | None = None
        self.base_url = ""

    async def __aenter__(self) -> PacedModel:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._answer)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            return web.json_response({"error": {"message": "this model only streams"}}, status=400)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": int(time.time())}
        base["model"] = body.get("model", "bench")

        def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            return f"data: {json.dumps(base | {'choices': [choice]})}\n\n".encode()

        await asyncio.sleep(FIRST_TOKEN_DELAY)
        for index, word in enumerate(WORDS):
            if index:
                await asyncio.sleep(TOKEN_DELAY)
            opening = event({"role": "assistant", "content": ""}) if index == 0 else b""
            await response.write(opening + event({"content": word}))
            if index == 0:
                self.first_token_at.append(time.perf_counter())
        self.last_token_at.append(time.perf_counter())
        usage = {"prompt_tokens": 50, "completion_tokens": TOKENS, "total_tokens": 50 + TOKENS}
        tail = event({}, "stop")
        if body.get("stream_options", {}).get("include_usage"):
            tail += f"data: {json.dumps(base | {'choices': [], 'usage': usage})}\n\n".encode()
        await response.write(tail + b"data: [DONE]\n\n")
        await response.write_eof()
        return response


async def _one_ask(model: PacedModel, folder: Path) -> tuple[float, float, str]:
    """One `nerve ask`: when its first and last bytes of answer arrived, and all it wrote."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NERVE_"))}
    env |= {
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "bench",
        "NERVE_MODEL": "bench-model",
        "NERVE_DB": str(folder / "nerve.db"),
        "NERVE_MCP_CONFIG": str(folder / "mcp.json"),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        "ask",
        "Tell me forty words.",
        env=env,
        cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    out = b""
    first = last = 0.0
    try:
        async with asyncio.timeout(RUN_TIMEOUT):
            errors = asyncio.ensure_future(process.stderr.read())
            while piece := await process.stdout.read(65536):
                last = time.perf_counter()
                first = first or last
                out += piece
            err = await errors
            code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    if code != 0:
        raise RuntimeError(f"nerve ask exited with {code}: {err.decode(errors='replace')[-500:]}")
    return first, last, out.decode(errors="replace")


async def terminal() -> dict[str, Any]:
    """`nerve ask` against the paced model, `RUNS` times: first visible text after the first token."""
    after_first: list[float] = []
    after_last: list[float] = []
    with tempfile.TemporaryDirectory(prefix="nerve-stream-bench-") as name:
        folder = Path(name)
        (folder / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
        async with PacedModel() as model:
            for run in range(RUNS):
                first, last, out = await _one_ask(model, folder)
                if out != ANSWER + "\n":
                    raise RuntimeError(f"run {run + 1}: stdout was not the answer alone: {out[:200]!r}")
                after_first.append((first - model.first_token_at[run]) * 1000)
                after_last.append((last - model.last_token_at[run]) * 1000)
    return {
        "runs": RUNS,
        "first_token_to_first_text_p50_ms": statistics.median(after_first),
        "first_token_to_first_text_max_ms": max(after_first),
        "last_token_to_whole_answer_p50_ms": statistics.median(after_last),
        "goal_ms": GOAL_MS,
        "goal_met": max(after_first) <= GOAL_MS,
    }


async def slack() -> dict[str, Any]:
    """One answer on Slack with streaming messages and one on a workspace without them."""
    figures: dict[str, Any] = {}
    for mode, streaming in (("streaming", True), ("edited", False)):
        found: dict[str, Any] = dict(await slack_stream_bench.run(streaming=streaming))
        found["goal_met"] = (
            found["first_text_ms"] <= GOAL_MS
            and found["slack_calls"] <= MAX_SLACK_CALLS
            and found["final_messages"] == 1
        )
        figures[mode] = found
    return figures


async def run() -> dict[str, Any]:
    """Every surface's figures for the live-answers scenario (what `python -m bench` tables)."""
    return {"terminal": await terminal(), "slack": await slack()}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run()), indent=2))
