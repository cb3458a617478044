"""Running one round of tool calls: every call of a model message at once, each result under its id.

Each call passes the guards first; the outcome tells the loop how to go on (S10).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from bot.observe import metrics
from bot.observe.tracing import tool_span
from bot.seams import ToolHost
from bot.text.nesting import loads
from bot.text.render import quote, shown_result, summarize_result, truncate
from bot.turn.failures import FailureKind, ToolFailure, shown_to_people
from bot.turn.guards import LoopGuard, parse_arguments
from bot.types import (
    Attachment,
    CallContext,
    CallSummary,
    ChatMessage,
    InputNeeded,
    Progress,
    Proposal,
    Report,
    SignInNeeded,
    ToolCall,
    ToolResult,
    ToolSpec,
    TurnEvent,
    TurnEventKind,
)

MAX_CALLS_PER_ROUND = 16
# The longest wait a server's rate limit may ask of a call (seconds), and the most of a result shown.
MAX_RATE_LIMIT_WAIT = 30.0
ATTACHMENT_CHARS = 20_000
# Longest tool name shown to people: real names are at most 64 characters, a model may send anything.
NAME_CHARS = 80

Outcome = Literal["ok", "fix_arguments", "failed", "refused_unavailable", "not_run"]
Sleep = Callable[[float], Awaitable[None]]


@dataclass(slots=True, kw_only=True)
class TurnState:
    """What the guards remember across the rounds of one turn."""

    guard: LoopGuard = field(default_factory=LoopGuard)
    # The first failure of each tool that is not called again in this turn.
    failed: dict[str, ToolFailure] = field(default_factory=dict)
    argument_errors: int = 0
    attachments: list[Attachment] = field(default_factory=list)
    # Said at the top of the answer: a shared file that was not read, images the model cannot see.
    notices: list[str] = field(default_factory=list)
    # The configured model that answered the latest round (a fallback when the primary failed).
    model: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOutcome:
    message: ChatMessage
    attachment: Attachment
    outcome: Outcome
    failure: ToolFailure | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Waiting:
    """A checked call held back for a person: for a decision, or for answers to its server's `questions`."""

    call: ToolCall
    spec: ToolSpec
    arguments: dict[str, Any]
    questions: InputNeeded | None = None
    # For a sign-in: the person must sign in to the call's server, then the call is made.
    sign_in: SignInNeeded | None = None
    # How its card reads, for a built-in call the core describes (a schedule to confirm).
    summary: CallSummary | None = None


# Sees a checked call before it runs: True (or a built-in's `Proposal`) holds it back for a person
# (approvals); a `ToolResult` refuses it unrun, as the tool would (a built-in's check of its arguments).
Screen = Callable[[ToolCall, ToolSpec, dict[str, Any]], Awaitable[bool | Proposal | ToolResult]]
# Whom a call runs for, so what its server asks or reports mid-call reaches them.
Contexts = Callable[[ToolCall, ToolSpec], CallContext]


@dataclass(eq=False)
class RoundRunner:
    """Checks and runs the tool calls of one model message concurrently (S5, S7, S10, S13)."""

    host: ToolHost
    sleep: Sleep = asyncio.sleep
    # The built-in tools by server name (`bot.memory.tools`, `bot.schedules.tools`), run in-process
    # instead of by a server.
    builtins: Mapping[str, ToolHost] = field(default_factory=dict)

    async def run(
        self,
        calls: Sequence[ToolCall],
        tools: Sequence[ToolSpec],
        state: TurnState,
        progress: Progress,
        screen: Screen | None,
        contexts: Contexts,
    ) -> list[CallOutcome | Waiting]:
        """All calls at once, in the order of `calls`; one `screen` holds back comes back as `Waiting`."""
        specs = {tool.name: tool for tool in tools}

        async def one(call: ToolCall) -> CallOutcome | Waiting:
            checked = self.check(call, specs, state)
            if isinstance(checked, CallOutcome):
                return checked
            spec, arguments = checked
            verdict = await screen(call, spec, arguments) if screen is not None else False
            if isinstance(verdict, ToolResult):
                return self.outcome(call, spec, arguments, verdict, state, specs)
            if isinstance(verdict, Proposal):
                return Waiting(call=call, spec=spec, arguments=verdict.arguments, summary=verdict.summary)
            if verdict:
                return Waiting(call=call, spec=spec, arguments=arguments)
            return await self.execute(call, spec, arguments, state, progress, specs, contexts(call, spec))

        # A TaskGroup, not gather: if one call fails unexpectedly, the others are cancelled, not orphaned.
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(call)) for call in calls[:MAX_CALLS_PER_ROUND]]
        too_many = f"At most {MAX_CALLS_PER_ROUND} tool calls run per message"
        return [task.result() for task in tasks] + [
            _unparsed(call, "too_many_calls", too_many, "Make this call in a later message.")
            for call in calls[MAX_CALLS_PER_ROUND:]
        ]

    def check(
        self, call: ToolCall, specs: dict[str, ToolSpec], state: TurnState
    ) -> CallOutcome | tuple[ToolSpec, dict[str, Any]]:
        """The guards: a refusal for the model, or the tool and the checked arguments."""
        spec = specs.get(call.name)
        if spec is None:
            names = ", ".join(sorted(specs)) or "(none)"
            detail = f"there is no tool named {quote(call.name)}"
            return _unparsed(call, "unknown_tool", detail, f"Use one of these exact names: {names}.")
        parsed = parse_arguments(call.arguments, spec)
        if parsed.value is None:
            return _unparsed(call, "arguments", parsed.detail or "invalid", parsed.hint)
        arguments = parsed.value
        earlier = state.failed.get(call.name)
        if earlier is not None:
            failure = failure_of(call, "not_retried", earlier.detail, _do_not_retry(call.name))
            return call_outcome(call, arguments, "refused_unavailable", failure)
        if not state.guard.allow(call.name, arguments):
            detail = "it was already called 3 times with these arguments in this turn"
            failure = failure_of(call, "loop_guard", detail, "Answer with the results you have.")
            return call_outcome(call, arguments, "fix_arguments", failure)
        return spec, arguments

    async def execute(
        self,
        call: ToolCall,
        spec: ToolSpec,
        arguments: dict[str, Any],
        state: TurnState,
        progress: Progress,
        specs: dict[str, ToolSpec],
        context: CallContext | None = None,
    ) -> CallOutcome | Waiting:
        """Run one checked call and read its outcome (S10); `Waiting` when its server needs answers first."""
        await progress(_call_event("tool_started", call, spec, f"calling {call.name}…"))
        with tool_span(call.name, call.id):
            result = await self._call_with_rate_limit_retry(spec, arguments, progress, context)
            metrics.tool_call(spec.server, spec.original_name, result)
        if result.needs_input is not None or result.needs_sign_in is not None:
            waits_for = "an answer" if result.needs_input is not None else f"a sign-in to {spec.server}"
            await progress(
                _call_event("tool_finished", call, spec, f"{call.name} waits for {waits_for}", ok=True)
            )
            return Waiting(
                call=call,
                spec=spec,
                arguments=arguments,
                questions=result.needs_input,
                sign_in=result.needs_sign_in,
            )
        outcome = "failed" if result.is_error else "done"
        await progress(
            _call_event("tool_finished", call, spec, f"{call.name} {outcome}", ok=not result.is_error)
        )
        return self.outcome(call, spec, arguments, result, state, specs)

    def outcome(
        self,
        call: ToolCall,
        spec: ToolSpec,
        arguments: dict[str, Any],
        result: ToolResult,
        state: TurnState,
        specs: dict[str, ToolSpec],
    ) -> CallOutcome:
        """How the turn goes on after a call's result (S10): the model fixes its arguments, or does not
        call a failed tool again in this turn."""
        if not result.is_error:
            return call_outcome(call, arguments, "ok", result=result, server=spec.server)
        # The model's mistakes (or a tool that changed): it is told how to call again.
        fixes = {
            "arguments": f"Call {call.name} again with arguments that fix this problem.",
            "unknown_tool": f"Use one of these exact names: {', '.join(sorted(specs))}.",
            "changed": "Nothing was run. If it is still needed, call it again as it is offered now.",
        }
        kind = result.error_kind or "execution"
        if kind in fixes:
            failure = failure_of(call, kind, result.detail or result.content, fixes[kind])
            return call_outcome(call, arguments, "fix_arguments", failure, result=result, server=spec.server)
        failure = failure_of(call, kind, _failure_detail(result, spec), _do_not_retry(call.name))
        state.failed[call.name] = failure
        return call_outcome(call, arguments, "failed", failure, result=result, server=spec.server)

    async def _call_with_rate_limit_retry(
        self, spec: ToolSpec, arguments: dict[str, Any], progress: Progress, context: CallContext | None
    ) -> ToolResult:
        """The call, bound to the spec it was checked against (`screened`), once more after a rate limit."""
        name = spec.name
        host = self.builtins.get(spec.server, self.host)
        result = await host.call_tool(name, arguments, context, screened=spec)
        if result.error_kind != "rate_limited":
            return result
        delay = min(result.retry_after or 1.0, MAX_RATE_LIMIT_WAIT)
        await progress(
            TurnEvent(
                kind="retrying",
                message=f"{name} is rate limited, retrying in {delay:.0f} s",
                tool=name,
                retry_in=delay,
            )
        )
        metrics.rate_limit_wait("mcp", delay)
        await self.sleep(delay)
        return await host.call_tool(name, arguments, context, screened=spec)


def call_outcome(
    call: ToolCall,
    arguments: dict[str, Any],
    outcome: Outcome,
    failure: ToolFailure | None = None,
    *,
    result: ToolResult | None = None,
    server: str | None = None,
) -> CallOutcome:
    """The model reads the result, or the failure's model text; `server` is shown beside it to people.
    Without a result the call was refused, never run: its failure's detail stands in for one."""
    if result is None:
        assert failure is not None
        result = ToolResult(content=failure.detail, is_error=True)
    message = ChatMessage(
        role="tool",
        tool_call_id=call.id,
        name=call.name,
        content=result.content if failure is None else failure.for_model(),
        is_error=result.is_error,
        latency_ms=result.latency_ms,
    )
    people = result if failure is None else replace(result, content=failure.for_people())
    attachment = make_attachment(call, arguments, people, server)
    return CallOutcome(message=message, attachment=attachment, outcome=outcome, failure=failure)


def _unparsed(call: ToolCall, kind: FailureKind, detail: str, hint: str) -> CallOutcome:
    """A call refused before its arguments were checked: people see them as the model wrote them."""
    return call_outcome(call, {"_raw": call.arguments}, "fix_arguments", failure_of(call, kind, detail, hint))


def make_attachment(
    call: ToolCall, arguments: dict[str, Any], shown: ToolResult, server: str | None = None
) -> Attachment:
    """The collapsible detail shown for one call; `shown.content` must already be what people may read."""
    text = shown_result(shown.content)
    capped, cut = truncate(text, ATTACHMENT_CHARS)
    return Attachment(
        tool_call_id=call.id,
        name=truncate(call.name, NAME_CHARS)[0],
        arguments=arguments,
        is_error=shown.is_error,
        latency_ms=shown.latency_ms,
        summary=summarize_result(text),
        content=capped,
        truncated=cut,
        resources=shown.resources,
        server=server,
    )


def stored_attachment(call: ToolCall, message: ChatMessage, server: str | None = None) -> Attachment:
    """A stored result's attachment: the store keeps what the model read; people get a failure's own text."""
    shown = ToolResult(
        content=shown_to_people(message), is_error=message.is_error, latency_ms=message.latency_ms or 0.0
    )
    return make_attachment(call, stored_arguments(call.arguments), shown, server)


def stored_results(messages: Sequence[ChatMessage]) -> list[tuple[ToolCall, ChatMessage]]:
    """The stored tool messages among `messages` that answer a call among them, each with its call."""
    calls = {call.id: call for m in messages for call in m.tool_calls}
    return [(calls[m.tool_call_id], m) for m in messages if m.role == "tool" and m.tool_call_id in calls]


def stored_arguments(raw: str) -> dict[str, Any]:
    """A stored call's arguments as a dict (`{"_raw": …}` when they were not a JSON object)."""
    try:
        value = loads(raw)
    except ValueError:
        return {"_raw": raw}
    return value if isinstance(value, dict) else {"_raw": raw}


def _call_event(
    kind: TurnEventKind, call: ToolCall, spec: ToolSpec, message: str, *, ok: bool | None = None
) -> TurnEvent:
    return TurnEvent(
        kind=kind, message=message, tool=call.name, tool_call_id=call.id, ok=ok, server=spec.server
    )


def failure_of(call: ToolCall, kind: FailureKind, detail: str, hint: str) -> ToolFailure:
    return ToolFailure(tool=truncate(call.name, NAME_CHARS)[0], kind=kind, detail=detail, hint=hint)


def _do_not_retry(name: str) -> str:
    return (
        f"Do not call {name} again in this answer: tell the user it did not work "
        "and answer with what you have."
    )


def _failure_detail(result: ToolResult, spec: ToolSpec) -> str:
    """What went wrong, for people and model alike; the server's own words for an execution failure."""
    if result.error_kind == "timeout":
        return f"it did not answer within {spec.timeout:g} s"
    if result.error_kind == "rate_limited":
        return "it is rate limited"
    if result.error_kind == "unavailable":
        return result.detail or "its server is not running"
    return (result.detail or result.content).strip() or "it failed without saying why"


# At most one progress event per call this often (seconds): platforms limit message edits, and a
# server may report far more often than people can read.
PROGRESS_EVERY = 1.0


def progress_reporter(call: ToolCall, progress: Progress, every: float = PROGRESS_EVERY) -> Report:
    """A call's progress as "tool_progress" events, throttled, except that the last step is always shown."""
    last = -math.inf

    async def report(done: float, total: float | None, message: str | None) -> None:
        nonlocal last
        now = time.monotonic()
        final = total is not None and done >= total
        if now - last < every and not final:
            return
        last = now
        fraction = min(1.0, max(0.0, done / total)) if total else None
        text = truncate(message or f"{call.name} is working…", 200)[0]
        await progress(
            TurnEvent(
                kind="tool_progress", message=text, tool=call.name, tool_call_id=call.id, fraction=fraction
            )
        )

    return report
