"""The client command the conformance suite runs: `python -m conformance.client <server-url>`.

It is nerve's real client, not a stand-in: an `MCPHost` with one Streamable HTTP server (the
scenario's), its tools listed as the model would be offered them, each call's arguments checked by
the same guard the model's calls pass (`parse_arguments`), and the call made with `host.call_tool`
and a `CallContext` whose person answers any form the server asks for. That person accepts the form
as nerve shows it (the server's defaults filled in), through the same conversion and checks as a
submitted form in Slack or Discord.

The suite names the scenario in `MCP_CONFORMANCE_SCENARIO` and may pass data in
`MCP_CONFORMANCE_CONTEXT`. Each call's outcome is printed on stdout; the exit code is non-zero when
the server never became ready or a call did not go as a model's call should (refused by the
checks, or failed where the scenario's server can run it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from bot.config import ServerConfig
from bot.forms import FormError, check_answer, form_from_schema
from bot.guards import parse_arguments
from bot.mcp.host import MCPHost
from bot.types import CallContext, InputAnswer, InputDraft, ToolSpec
from conformance.plans import Call, plan

SERVER = "conformance"
# Scenario servers answer at once; the suite itself stops a client after 30 s.
READY_WITHIN = 15.0
CALL_TIMEOUT = 20.0
OWNER = "conformance:person"


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


async def run_call(host: MCPHost, tools: dict[str, ToolSpec], call: Call) -> bool:
    """One call the way the model's calls go: offered tool, checked arguments, then the host."""
    spec = tools.get(call.tool)
    if spec is None:
        print(f"{call.tool}: not offered (offered: {', '.join(sorted(tools)) or 'none'})")
        return False
    parsed = parse_arguments(json.dumps(call.arguments, ensure_ascii=False), spec)
    if parsed.value is None:
        print(f"{call.tool}: arguments refused: {parsed.problem}")
        return False
    context = CallContext(tool=spec.name, owner=OWNER, ask=accept_as_shown)
    result = await host.call_tool(spec.name, parsed.value, context=context)
    outcome = "error" if result.is_error else "ok"
    print(f"{call.tool}: {outcome}: {result.content[:300]}")
    return not result.is_error or call.may_fail


async def run_rounds(host: MCPHost, rounds: Sequence[tuple[Call, ...]]) -> bool:
    tools = {tool.name: tool for tool in host.list_tools()}
    ok = True
    for calls in rounds:
        # The calls of one round run at once, as the calls of one model message do.
        outcomes = await asyncio.gather(*(run_call(host, tools, call) for call in calls))
        ok = ok and all(outcomes)
    return ok


async def main(url: str, scenario: str, context: dict[str, Any]) -> int:
    server = ServerConfig.model_validate({"type": "http", "url": url, "timeout": CALL_TIMEOUT})
    async with MCPHost({SERVER: server}, default_timeout=CALL_TIMEOUT) as host:
        try:
            async with asyncio.timeout(READY_WITHIN):
                await host.wait_until_ready()
        except TimeoutError:
            for name, reason in host.problems():
                print(f"server {name} not ready: {reason}")
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
