"""A call whose 2026-07-28 server asks for input in its result, driven so the turn can park.

The SDK would ask through the client's callbacks and retry, so the turn would wait for a person.
Here the first round of form or link questions comes back as `InputNeeded`, the turn parks holding
nothing, and the resumed call is made again with the answers and the server's state; later rounds,
and anything else (sampling, roots), are answered at once as the SDK does. A server may no longer
open its sealed state (restarted, or past the seal's lifetime): the answers are then sent without
it, as for a first call.
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
