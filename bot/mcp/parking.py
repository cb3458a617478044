"""A call whose 2026-07-28 server asks for input in its result, driven so the turn can park.

The SDK would answer such a result at once (asking through the client's callbacks) and retry: the
call, and with it the turn, would wait for a person. Here the first round of questions comes back
as `InputNeeded` instead, so the turn is parked in the store holding nothing; the resumed call is
made again with the answers and the server's state (`CallContext.resume`). Questions a resumed call
asks again, and anything other than a form or a link (sampling, roots), are answered at once
through the client's callbacks, as the SDK does.

The server may no longer open the state it returned: it seals it under a key its process made (the
SDK's default), so a stdio server, restarted with the bot, refuses it; and the seal has a lifetime
(600 s by default) a person may well take to answer. The answers are then sent again without the
state, as for a first call: a server that needs no memory of the first round (the usual tool) runs
with them, and one that does asks again, as a resumed call's new questions are asked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio
import mcp_types
from mcp import Client, MCPError
from mcp.client.session import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT

from bot.mcp.server_messages import draft_of
from bot.types import CallContext, InputNeeded

logger = logging.getLogger(__name__)

MAX_INPUT_ROUNDS = 10
# The SDK's frozen answer to a state it cannot open, expired or not its own (`mcp.server.request_state`).
STATE_REFUSED = "invalid_request_state"
_BACKOFF_FIRST, _BACKOFF_MAX = 0.05, 0.25


class TooManyInputRounds(RuntimeError):
    def __init__(self) -> None:
        super().__init__(f"the server asked for input more than {MAX_INPUT_ROUNDS} times in one call")


async def call_parkable(
    client: Client,
    name: str,
    arguments: dict[str, Any],
    context: CallContext,
    on_progress: ProgressFnT,
) -> mcp_types.CallToolResult | InputNeeded:
    """The call's result, or (when `context.park`) the questions it must wait for."""
    session = client.session
    state: str | None = None
    responses: dict[str, mcp_types.InputResponse] | None = None
    if context.resume is not None:
        state = context.resume.request_state
        responses = {
            key: mcp_types.ElicitResult(action=answer.action, content=answer.content)
            for key, answer in context.resume.answers
        }
    delay = _BACKOFF_FIRST
    for _ in range(MAX_INPUT_ROUNDS):
        try:
            result = await session.call_tool(
                name,
                arguments,
                progress_callback=on_progress,
                input_responses=responses,
                request_state=state,
                allow_input_required=True,
            )
        except MCPError as exc:
            if state is None or not state_refused(exc):
                raise
            logger.info("the server of %s no longer takes its state; sending the answers without it", name)
            state = None
            continue
        if not isinstance(result, mcp_types.InputRequiredResult):
            if not isinstance(result, mcp_types.CallToolResult):
                raise MCPError(code=mcp_types.INTERNAL_ERROR, message="the server sent an unexpected result")
            return result
        state = result.request_state
        requests = result.input_requests or {}
        if not requests:
            await anyio.sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX)
            responses = None
            continue
        delay = _BACKOFF_FIRST
        if context.park and all(isinstance(r, mcp_types.ElicitRequest) for r in requests.values()):
            questions = tuple(
                (key, draft_of(request.params, (context.tool,)))
                for key, request in requests.items()
                if isinstance(request, mcp_types.ElicitRequest)
            )
            return InputNeeded(request_state=state, questions=questions)
        responses = {}
        for key, request in requests.items():
            meta = request.params.meta if request.params else None
            asked = ClientRequestContext(session=session, request_id=key, meta=meta)
            answer = await session.dispatch_input_request(asked, request)
            if isinstance(answer, mcp_types.ErrorData):
                raise MCPError.from_error_data(answer)
            responses[key] = answer
    raise TooManyInputRounds()


def state_refused(exc: MCPError) -> bool:
    """Whether the server refused the `requestState` it was sent (expired, or sealed by another
    process), rather than the call itself."""
    if exc.error.code != mcp_types.INVALID_PARAMS:
        return False
    data = exc.error.data
    if isinstance(data, Mapping) and data.get("reason") == STATE_REFUSED:
        return True
    return "requeststate" in exc.error.message.lower()
