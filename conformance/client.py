"""The client command the conformance suite runs: `python -m conformance.client <server-url>`.

It is nerve's real client, not a stand-in: an `MCPHost` with one Streamable HTTP server (the
scenario's), its tools listed as the model is offered them, and each round of calls run the way a
model message's calls are, by the `RoundRunner` (argument checks, then `host.call_tool`, all calls
of a round at once), with a `CallContext` whose person answers any form the server asks for. That
person accepts the form as nerve shows it (the server's defaults filled in), through the same
conversion and checks as a form submitted in Slack or Discord.

The suite names the scenario in `MCP_CONFORMANCE_SCENARIO` and may pass data in
`MCP_CONFORMANCE_CONTEXT`. Each call's outcome is printed on stdout; the exit code is non-zero when
the server never became ready or a call did not go as a model's call should (refused by the
checks, or failed where the scenario's server can run it).

In the `auth/` scenarios the server entry says how nerve signs in, as an operator's would: OAuth
(with the pre-registered client the suite hands over, if any) or client credentials. nerve's
`NerveOAuth` then signs in through the loopback flow of the terminal: the link goes to `webbrowser`,
whose BROWSER (set by `conformance.run`) follows the suite's redirects back to nerve's callback.
A sign-in nerve refuses or gives up on ends the run at once, with a non-zero exit code.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import httpx2

from bot.forms import FormError, check_answer, form_from_schema
from bot.mcp.auth.loopback import LoopbackSignIn
from bot.mcp.auth.memory import MemoryTokens
from bot.mcp.auth.provider import NerveOAuth, auth_for
from bot.mcp.host import MCPHost
from bot.mcp.server_config import AuthConfig, ServerConfig
from bot.turn.calls import CallOutcome, RoundRunner, TurnState
from bot.types import CallContext, InputAnswer, InputDraft, ToolCall, ToolSpec, no_progress
from conformance.plans import Call, plan

SERVER = "conformance"
# Scenario servers answer at once; the suite itself stops a client after 30 s.
READY_WITHIN = 15.0
CALL_TIMEOUT = 20.0
OWNER = "conformance:person"
# The suite's authorization page answers at once; a sign-in slower than this is broken.
SIGN_IN_WAIT = 10.0
# The Client ID Metadata Document URL the suite expects as client_id (auth/basic-cimd). nerve's own
# is NERVE_PUBLIC_URL/oauth/client.json; the suite never fetches it for its verdicts.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


async def accept_as_shown(draft: InputDraft) -> InputAnswer:
    """A person who submits the form unchanged: every field as nerve pre-fills it (its default)."""
    if draft.mode != "form" or draft.schema is None:
        print(f"  input asked ({draft.mode}): declined, only forms are answered here")
        return InputAnswer(action="decline")
    try:
        form = form_from_schema(draft.schema)
    except FormError as error:
        print(f"  input asked: declined, {error}")
        return InputAnswer(action="decline")
    shown = {field.name: field.default for field in form.fields if field.default is not None}
    content, errors = check_answer(form, shown)
    if content is None:
        print(f"  input asked: cancelled, the form as shown is not a valid answer: {errors}")
        return InputAnswer(action="cancel")
    print(f"  input asked: {draft.message!r} → accepted {json.dumps(content, ensure_ascii=False)}")
    return InputAnswer(action="accept", content=content)


def as_model_calls(calls: Sequence[Call], round_no: int) -> list[ToolCall]:
    """The planned calls as a model message's tool calls: name and arguments as a JSON string."""
    return [
        ToolCall(
            id=f"call_{round_no}_{i}",
            name=call.tool,
            arguments=json.dumps(call.arguments, ensure_ascii=False),
        )
        for i, call in enumerate(calls)
    ]


def context_for(call: ToolCall, spec: ToolSpec) -> CallContext:
    return CallContext(tool=spec.name, owner=OWNER, ask=accept_as_shown)


async def run_rounds(host: MCPHost, rounds: Sequence[tuple[Call, ...]]) -> bool:
    """Each round as one model message: the round runner checks every call and runs them at once."""
    runner = RoundRunner(host)
    state = TurnState()
    ok = True
    for round_no, calls in enumerate(rounds):
        outcomes = await runner.run(
            as_model_calls(calls, round_no), host.list_tools(), state, no_progress, None, context_for
        )
        for call, outcome in zip(calls, outcomes, strict=True):
            assert isinstance(outcome, CallOutcome)  # no screen: nothing waits for approval
            print(f"{call.tool}: {outcome.outcome}: {outcome.attachment.content[:300]}")
            ok = ok and (outcome.outcome == "ok" or (call.may_fail and outcome.outcome == "failed"))
    return ok


def auth_of(scenario: str, context: dict[str, Any]) -> AuthConfig | None:
    """How nerve signs in to the scenario's server: as an operator would write it in the servers file."""
    if not scenario.startswith("auth/"):
        return None
    if scenario.startswith("auth/client-credentials-"):
        return AuthConfig(
            type="client_credentials",
            client_id=context.get("client_id"),
            client_secret=context.get("client_secret"),
        )
    return AuthConfig(
        type="oauth",
        identity="bot",
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
    )


async def until_ready(host: MCPHost, auth: httpx2.Auth | None) -> str | None:
    """None once the server is connected; else why not (a failed sign-in ends the wait at once)."""
    try:
        async with asyncio.timeout(READY_WITHIN):
            while not all(host.server_states().values()):
                failure = auth.last_failure if isinstance(auth, NerveOAuth) else None
                if failure is not None:
                    return f"sign-in failed: {type(failure).__name__}: {failure}"
                await asyncio.sleep(0.05)
    except TimeoutError:
        return "; ".join(f"{name}: {reason}" for name, reason in host.problems()) or "not ready in time"
    return None


async def main(url: str, scenario: str, context: dict[str, Any]) -> int:
    config = auth_of(scenario, context)
    # The suite's servers listen on this machine.
    server = ServerConfig(url=url, type="http", timeout=CALL_TIMEOUT, auth=config, allowPrivateNetwork=True)
    if config is None:
        return await connect_and_run(server, None, scenario, context)
    async with LoopbackSignIn(say=print, wait=SIGN_IN_WAIT) as sign_in:
        auth = auth_for(
            url,
            config,
            MemoryTokens(),
            redirect_uri=sign_in.redirect_uri,
            client_metadata_url=CLIENT_METADATA_URL,
            redirect_handler=sign_in.redirect_handler,
            callback_handler=sign_in.callback_handler,
        )
        return await connect_and_run(server, auth, scenario, context)


async def connect_and_run(
    server: ServerConfig, auth: httpx2.Auth | None, scenario: str, context: dict[str, Any]
) -> int:
    signs_in = (lambda _name, _config: auth) if auth is not None else None
    async with MCPHost({SERVER: server}, default_timeout=CALL_TIMEOUT, auth=signs_in) as host:
        problem = await until_ready(host, auth)
        if problem is not None:
            print(f"server {SERVER} not ready: {problem}")
            return 1
        tools = host.list_tools()
        print(f"{scenario}: {len(tools)} tools offered: {', '.join(tool.name for tool in tools)}")
        ok = await run_rounds(host, plan(scenario, context, tools))
    return 0 if ok else 1


def cli(argv: Sequence[str]) -> int:
    if not argv:
        print("usage: python -m conformance.client <server-url>", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    return asyncio.run(main(argv[-1], scenario, context))


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
