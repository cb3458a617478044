"""Running one round of tool calls: every call of a model message at once, each result under its id.

Each call passes the guards first (known name, valid arguments, loop guard, not failed earlier in the
turn); only then does it reach the host. The outcome tells the loop how to go on (S10).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.guards import LoopGuard, parse_arguments
from bot.render import summarize_result, truncate
from bot.seams import ToolHost
from bot.types import Attachment, ChatMessage, Progress, ToolCall, ToolResult, ToolSpec, TurnEvent

MAX_CALLS_PER_ROUND = 16

Outcome = Literal["ok", "fix_arguments", "failed", "refused_unavailable"]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(slots=True, kw_only=True)
class TurnState:
    """What the guards remember across the rounds of one turn."""

    guard: LoopGuard = field(default_factory=LoopGuard)
    unavailable: dict[str, str] = field(default_factory=dict)
    argument_errors: int = 0
    attachments: list[Attachment] = field(default_factory=list)


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOutcome:
    message: ChatMessage
    attachment: Attachment
    outcome: Outcome
    problem: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSettings:
    max_rate_limit_wait: float = 30.0
    attachment_chars: int = 20_000


def _error_body(problem: str, kind: str) -> str:
    return json.dumps({"error": problem, "kind": kind}, ensure_ascii=False)


class RoundRunner:
    """Checks and runs the tool calls of one model message concurrently (S5, S7, S10, S13)."""

    def __init__(self, host: ToolHost, settings: CallSettings, sleep: Sleep = asyncio.sleep) -> None:
        self._host = host
        self._settings = settings
        self._sleep = sleep

    async def run(
        self, calls: Sequence[ToolCall], tools: Sequence[ToolSpec], state: TurnState, progress: Progress
    ) -> list[CallOutcome]:
        """All calls at once; results come back in the order of `calls`, whatever order they finish in."""
        specs = {tool.name: tool for tool in tools}
        allowed, refused = calls[:MAX_CALLS_PER_ROUND], calls[MAX_CALLS_PER_ROUND:]
        # A TaskGroup, not gather: if one call fails unexpectedly, the others are cancelled, not orphaned.
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(self._one(call, specs, state, progress)) for call in allowed]
        problem = f"At most {MAX_CALLS_PER_ROUND} tool calls per message; make this call in a later message."
        return [task.result() for task in tasks] + [
            self._refusal(call, {"_raw": call.arguments}, problem, "too_many_calls", "fix_arguments")
            for call in refused
        ]

    async def _one(
        self, call: ToolCall, specs: dict[str, ToolSpec], state: TurnState, progress: Progress
    ) -> CallOutcome:
        spec = specs.get(call.name)
        if spec is None:
            names = ", ".join(sorted(specs)) or "(none)"
            problem = f"There is no tool named {call.name!r}. Use one of these exact names: {names}."
            return self._refusal(call, {"_raw": call.arguments}, problem, "unknown_tool", "fix_arguments")
        parsed = parse_arguments(call.arguments, spec)
        if parsed.value is None:
            return self._refusal(
                call, {"_raw": call.arguments}, parsed.problem or "invalid", "arguments", "fix_arguments"
            )
        arguments = parsed.value
        if call.name in state.unavailable:
            reason = state.unavailable[call.name]
            problem = f"{call.name} is temporarily unavailable ({reason}); do not call it again."
            return self._refusal(call, arguments, problem, "unavailable", "refused_unavailable")
        if not state.guard.allow(call.name, arguments):
            problem = (
                f"{call.name} was already called 3 times with these arguments in this turn. "
                "Answer with the results you have."
            )
            return self._refusal(call, arguments, problem, "loop_guard", "fix_arguments")

        await progress(
            TurnEvent(
                kind="tool_started", message=f"calling {call.name}…", tool=call.name, tool_call_id=call.id
            )
        )
        result = await self._call_with_rate_limit_retry(call.name, arguments, progress)
        await progress(
            TurnEvent(
                kind="tool_finished",
                message=f"{call.name} {'failed' if result.is_error else 'done'}",
                tool=call.name,
                tool_call_id=call.id,
                ok=not result.is_error,
            )
        )
        if not result.is_error:
            return self._outcome(call, arguments, result.content, result, "ok")
        if result.error_kind in ("arguments", "unknown_tool"):
            body = _error_body(result.content, "arguments")
            return self._outcome(call, arguments, body, result, "fix_arguments", problem=result.content)
        reason = _failure_reason(result, spec)
        state.unavailable[call.name] = reason
        body = _error_body(
            f"{result.content} — {call.name} is temporarily unavailable; do not retry it now.",
            result.error_kind or "execution",
        )
        return self._outcome(call, arguments, body, result, "failed", problem=reason)

    async def _call_with_rate_limit_retry(
        self, name: str, arguments: dict[str, Any], progress: Progress
    ) -> ToolResult:
        result = await self._host.call_tool(name, arguments)
        if result.error_kind != "rate_limited":
            return result
        delay = min(result.retry_after or 1.0, self._settings.max_rate_limit_wait)
        await progress(
            TurnEvent(
                kind="retrying",
                message=f"{name} is rate limited, retrying in {delay:.0f} s",
                tool=name,
                retry_in=delay,
            )
        )
        await self._sleep(delay)
        return await self._host.call_tool(name, arguments)

    def _refusal(
        self, call: ToolCall, arguments: dict[str, Any], problem: str, kind: str, outcome: Outcome
    ) -> CallOutcome:
        result = ToolResult(content=problem, is_error=True)
        return self._outcome(call, arguments, _error_body(problem, kind), result, outcome, problem=problem)

    def _outcome(
        self,
        call: ToolCall,
        arguments: dict[str, Any],
        body: str,
        result: ToolResult,
        outcome: Outcome,
        problem: str = "",
    ) -> CallOutcome:
        message = ChatMessage(
            role="tool",
            tool_call_id=call.id,
            name=call.name,
            content=body,
            is_error=result.is_error,
            latency_ms=result.latency_ms,
        )
        attachment = make_attachment(
            call,
            arguments,
            result.content,
            is_error=result.is_error,
            latency_ms=result.latency_ms,
            limit=self._settings.attachment_chars,
        )
        return CallOutcome(message=message, attachment=attachment, outcome=outcome, problem=problem)


def make_attachment(
    call: ToolCall, arguments: dict[str, Any], content: str, *, is_error: bool, latency_ms: float, limit: int
) -> Attachment:
    """The collapsible detail an adapter shows for one call: capped content, one-line summary."""
    shown, cut = truncate(content, limit)
    return Attachment(
        tool_call_id=call.id,
        name=call.name,
        arguments=arguments,
        is_error=is_error,
        latency_ms=latency_ms,
        summary=summarize_result(content),
        content=shown,
        truncated=cut,
    )


def _failure_reason(result: ToolResult, spec: ToolSpec) -> str:
    if result.error_kind == "timeout":
        return f"it did not answer within {spec.timeout:g} s"
    if result.error_kind == "rate_limited":
        return "it is rate limited"
    if result.error_kind == "unavailable":
        return "its server is not running"
    first_line = result.content.strip().splitlines()[0] if result.content.strip() else "it failed"
    return first_line[:200]
