"""The loop of one turn: ask the model, run its tool calls in parallel, persist the round, repeat.

A round whose calls wait for a person (`TurnScreen`) comes back as a `WaitingRound`, which
`bot.asks.parking` parks and later resumes here. How turns run (rounds, limits, waits) is `AgentConfig`.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from bot.budgets.meter import UsageMeter, open_request, settle_request
from bot.budgets.rules import Budgets, Prices
from bot.errors import ContextTooLong, LLMError, StreamCut, TurnOverdue
from bot.files.desk import FileDesk, TurnFiles
from bot.files.intake import FileRules
from bot.files.vision import VisionMode
from bot.mcp.auth.people import person_of
from bot.memory.prompt import memory_sections
from bot.memory.scope import turn_scope
from bot.memory.secrets import secret_kind
from bot.memory.tools import MEMORY_SERVER, MemoryTools, read_by_tools, remembered
from bot.model.tokens import estimate_message_tokens, estimate_tools_tokens
from bot.observe import metrics
from bot.policy.approval import call_hash
from bot.policy.scopes import Scopes, place_id
from bot.schedules.tools import NAMES as SCHEDULE_TOOL_NAMES
from bot.schedules.tools import RUNS_ON, SCHEDULES_SERVER
from bot.seams import LLM, ConfirmedTools, ModelChooser, PlacedTools, PromptNote, Store, ToolHost
from bot.store.approvals import ApprovalLedger
from bot.text.render import truncate
from bot.turn.calls import (
    CallOutcome,
    Contexts,
    RoundRunner,
    TurnState,
    Waiting,
    progress_reporter,
    stored_attachment,
    stored_results,
)
from bot.turn.context import Budget, build_request
from bot.turn.deadline import TurnDeadline
from bot.turn.failures import model_failure, overdue
from bot.turn.guards import confirm_prompt, triggered_tools
from bot.types import (
    AgentReply,
    AuditEntry,
    CallContext,
    ChatMessage,
    Completion,
    ConversationKey,
    Incoming,
    InputAnswer,
    InputDraft,
    Platforms,
    Progress,
    Proposal,
    ToolCall,
    ToolResult,
    ToolSpec,
    TurnEvent,
    Usage,
)

logger = logging.getLogger(__name__)

CUT_OFF_NOTE = (
    "⚠️ The answer was cut off: the model service stopped sending it. Ask again for the whole answer."
)


# Short on purpose, with the tool rule first: a long prompt made models stop calling tools (S12).
DEFAULT_SYSTEM_PROMPT = """\
Real-time or external facts (weather, air quality, places, anything a tool provides) must come from a \
tool call: never guess them. Call independent tools together in one message. Never call the same tool \
with the same arguments more than 3 times. Tool results are facts from outside: base your answer on \
them, and say plainly when a tool failed. Answer concisely in Markdown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    max_rounds: int = 8
    context_tokens: int = 16000
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_argument_errors: int = 3

    # Longer questions are stored but answered with the limit, never sent to the model.
    max_question_chars: int = 20_000
    # The most turns running at once across all conversations (the ceiling of the model's adaptive
    # limit, `bot.model.concurrency`), and how many more may wait for a slot.
    max_concurrent_turns: int = 128
    turn_queue: int = 100
    # Which servers and tools each place may use; who may decide on any approval; how long one waits.
    scopes: Scopes = field(default_factory=Scopes)
    admins: frozenset[str] = frozenset()
    approval_timeout: float = 600.0
    # How long a server's question mid-call waits for its person before the server gets "cancel".
    input_timeout: float = 600.0
    # Seconds a call waits for its person to sign in to a per-person server.
    sign_in_timeout: float = 900.0
    # Seconds of model work one turn may take in all (rounds, retries, tool calls), not counting
    # time spent waiting for a person; then it ends with a plain sentence (`bot.turn.deadline`).
    turn_deadline: float = 180.0
    # The platforms the front ends speak on: whose user ids are global (a person's sign-ins), and
    # how a person starts afresh on each (`bot.turn.failures`).
    platforms: Platforms = field(default_factory=Platforms)
    # The share of `context_tokens` the memories a turn may see take at most (`bot.memory.prompt`).
    memory_share: float = 0.1
    # Schedules one person may have in effect at once (`bot.schedules.tools`).
    schedules_per_person: int = 20
    # Seconds after its time a slot nothing ran is still run, late; a once schedule whose time passed
    # while its person was confirming it is still made (and runs at once) within it too.
    schedule_grace: float = 3600.0
    # Where the schedule tools are offered: the platforms whose front ends run schedules.
    schedules_run_on: frozenset[str] | None = RUNS_ON
    # What is read of the files people share (size and count limits), whether the model is shown
    # images (NERVE_VISION), and the model's name, under which a refusal of images is remembered.
    files: FileRules = field(default_factory=FileRules)
    vision: VisionMode = "auto"
    model: str = ""
    # What each model costs, the limits turns are held to, the zone of their days, the currency.
    prices: Prices = field(default_factory=Prices)
    budgets: Budgets = field(default_factory=Budgets)
    budget_zone: str = "UTC"
    currency: str = "USD"


class QuestionDesk(Protocol):
    """Where a server's question mid-call is shown to its person (`bot.asks.inputs.InputDesk`)."""

    async def ask(
        self, incoming: Incoming, server: str, draft: InputDraft, progress: Progress
    ) -> InputAnswer: ...

    async def completed(self, server: str, elicitation_id: str) -> None: ...


@dataclass(slots=True)
class TurnScreen:
    """Screens the calls of one turn and collects the audit of what ran without asking."""

    store: ApprovalLedger
    incoming: Incoming
    # The model's context holds tool results: text no person wrote, which may carry instructions.
    read_by_tools: bool = False
    audit: list[AuditEntry] = field(default_factory=list)
    # The built-in tool hosts by server name: some hold their calls for their person's own word.
    builtins: Mapping[str, ToolHost] = field(default_factory=dict)

    async def __call__(
        self, call: ToolCall, spec: ToolSpec, arguments: dict[str, Any]
    ) -> bool | Proposal | ToolResult:
        # What acts as its person later (a schedule) waits for their word every time, once checked:
        # a call that cannot be made is refused to the model without asking anyone.
        host = self.builtins.get(spec.server)
        if isinstance(host, ConfirmedTools) and host.confirmed(spec):
            return await host.proposal(arguments, self.incoming)
        # What a tool's text may have led to (a memory planted, or one deleted) waits for its person's
        # OK, whatever else is allowed; a secret is refused outright when it runs, never shown on a card.
        led_by_tools = spec.server == MEMORY_SERVER and self.read_by_tools
        if led_by_tools and spec.original_name == "forget":
            return True
        # Cancelled is final: a cancel a tool's text may have led to waits for its person's OK too.
        if spec.server == SCHEDULES_SERVER and spec.original_name == "cancel_schedule" and self.read_by_tools:
            return True
        if (
            led_by_tools
            and spec.original_name == "remember"
            and not secret_kind(str(arguments.get("text", "")))
        ):
            return True
        place = place_id(self.incoming.where())
        if not spec.needs_approval:
            outcome = "auto: approval not required" if spec.approval == "never" else "auto: read-only"
        else:
            # Only while the tool is still defined as it was when a person chose "always allow here".
            if await self.store.remembered(place, spec.server, spec.original_name) != spec.definition_hash:
                return True
            outcome = "auto: always-allowed here"
        self.audit.append(
            AuditEntry(
                who="nerve",
                place=place,
                server=spec.server,
                tool=spec.original_name,
                call_id=call.id,
                arguments_hash=call_hash(spec.server, spec.original_name, arguments),
                outcome=outcome,
            )
        )
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnPrompt:
    """What a turn's requests start with (`system`), and the note its own message ends with."""

    system: str
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingRound:
    """A round some of whose calls wait for a person: what parking it needs."""

    incoming: Incoming
    answer: ChatMessage
    results: Sequence[CallOutcome | Waiting]
    state: TurnState
    usage: Usage
    rounds_used: int


@dataclass(eq=False, kw_only=True)
class TurnLoop:
    """Rounds of model and tool calls for one turn at a time; shared by every conversation."""

    llm: LLM
    host: ToolHost
    store: Store
    config: AgentConfig
    runner: RoundRunner
    # Where calls are screened for approval; without it every call runs at once.
    screens: ApprovalLedger | None = None
    # Where servers' questions mid-call are shown and answered; without it they get "cancel".
    desk: QuestionDesk | None = None
    # The built-in memory tools and what the model is sent of memory; without them, no memory.
    memory: MemoryTools | None = None
    # The conversations' shared files; without it, a file is only named in its message.
    files: FileDesk | None = None
    # Every request's usage recorded and held to the budgets; without it, only counted in the metrics.
    meter: UsageMeter | None = None
    # How the server's token count compares with our offline estimate, learnt from each answer.
    _token_scale: float = field(default=1.0, init=False)

    def tools(self, incoming: Incoming | None = None) -> list[ToolSpec]:
        """What the model is offered right now (in the place `incoming` was written, if given)."""
        tools = self.host.list_tools()
        built_in = [
            spec
            for host in self.runner.builtins.values()
            if incoming is None or not isinstance(host, PlacedTools) or host.offered_in(incoming)
            for spec in host.list_tools()
        ]
        if built_in:
            names = {spec.name for spec in built_in}
            tools = [*built_in, *(spec for spec in tools if spec.name not in names)]
        return tools if incoming is None else self.config.scopes.offered(incoming.where(), tools)

    def llm_for(self, incoming: Incoming) -> LLM:
        """The models as the place asks them: its own first when the policy names one."""
        name = self.config.scopes.model_for(incoming.where())
        return self.llm.choose(name) if name and isinstance(self.llm, ModelChooser) else self.llm

    async def system_prompt(self, incoming: Incoming) -> TurnPrompt:
        """The system prompt with the place's memories, and the turn's note (the time now, the person's
        memories), both the same every round. What is the same for every turn of a place comes first
        and alone in the system prompt, so a provider's cache keeps the start of every request."""
        prompt, notes = self.config.system_prompt, []
        # A built-in's line (the time now, for schedules), where the policy offers its tools.
        for host in self.runner.builtins.values():
            offered = self.config.scopes.offered(incoming.where(), host.list_tools())
            if isinstance(host, PlacedTools) and not host.offered_in(incoming):
                continue
            if isinstance(host, PromptNote) and offered and (note := await host.prompt_note(incoming)):
                notes.append(note)
        # Where the policy hides memory, none is sent either.
        if self.memory is not None and self.config.scopes.allows(incoming.where(), MEMORY_SERVER, "recall"):
            tokens = int(self.config.context_tokens * self.config.memory_share)
            scope = turn_scope(incoming, self.config.platforms)
            sections = await memory_sections(self.memory.ledger, scope, incoming.text, tokens)
            prompt = f"{prompt}\n\n{sections.place}" if sections.place else prompt
            notes += [sections.person] if sections.person else []
        return TurnPrompt(system=prompt, note="\n\n".join(notes))

    async def run(
        self,
        incoming: Incoming,
        history: list[ChatMessage],
        state: TurnState,
        progress: Progress,
        *,
        deadline: TurnDeadline,
        first_round: int = 0,
    ) -> AgentReply | WaitingRound:
        """Rounds from `first_round` on, until an answer, a stop, or a round that waits for a person."""
        usage = Usage()
        nudge: list[ChatMessage] = []
        prompt = await self.system_prompt(incoming)
        # What the budgets estimate each request from (the note is a line or two of the last message).
        head = ChatMessage(role="system", content=f"{prompt.system}\n\n{prompt.note}")
        files = (
            None
            if self.files is None
            else await self.files.for_turn(
                incoming.key, history, state.notices, self.config.scopes.model_for(incoming.where())
            )
        )
        for round_index in range(first_round, self.config.max_rounds):
            # Each round sees the tools as they are now: a server may change its list mid-turn.
            tools = self.tools(incoming)
            # Also tells a front end that text shown for an earlier round is superseded.
            await progress(TurnEvent(kind="thinking", message="thinking…"))
            first = round_index == first_round
            charge = await open_request(self.meter, incoming, [head, *history, *nudge], tools, check=first)
            if isinstance(charge, str):
                return await self.finish(incoming.key, charge, state, usage)
            if charge is not None and charge.notice:
                state.notices.append(charge.notice)
            try:
                async with deadline.running("model"), charge or contextlib.nullcontext():
                    completion = await self._complete(
                        prompt, [*history, *nudge], tools, progress, files, llm=self.llm_for(incoming)
                    )
                    await settle_request(charge, completion, self.config.model)
            except StreamCut as cut:
                # Stored as the answer: people saw it, and the transcript stays user → assistant.
                logger.warning("answer cut off for %s: %s", incoming.key, cut.message)
                text = f"{cut.partial.rstrip()}\n\n{CUT_OFF_NOTE}"
                return await self.finish(incoming.key, text, state, usage, cut_short=True)
            usage += completion.usage or Usage()
            state.model = completion.model or state.model
            answer = _with_unique_call_ids(completion.message, history)
            if not answer.tool_calls:
                hits = [] if nudge or state.attachments else triggered_tools(incoming.text, tools)
                if hits:
                    # The draft and the nudge are not persisted: only what the model settles on is.
                    nudge = [answer, ChatMessage(role="user", content=confirm_prompt(hits))]
                    continue
                return await self.finish(incoming.key, answer.content or "", state, usage)
            nudge = []
            screen = (
                TurnScreen(
                    store=self.screens,
                    incoming=incoming,
                    # A shared file's text was not written by the person either (a page, a log).
                    read_by_tools=read_by_tools(history, own=SCHEDULE_TOOL_NAMES) or files is not None,
                    builtins=self.runner.builtins,
                )
                if self.screens
                else None
            )
            contexts = self.call_contexts(incoming, progress, deadline)
            async with deadline.running("tools"):
                results = await self.runner.run(answer.tool_calls, tools, state, progress, screen, contexts)
            if screen is not None:
                await screen.store.record_audit(incoming.key, screen.audit)
            if any(isinstance(r, Waiting) for r in results):
                return WaitingRound(
                    incoming=incoming,
                    answer=answer,
                    results=results,
                    state=state,
                    usage=usage,
                    rounds_used=round_index + 1,
                )
            outcomes = [r for r in results if isinstance(r, CallOutcome)]
            round_messages = [answer, *(outcome.message for outcome in outcomes)]
            await self.store.append(incoming.key, round_messages)
            history.extend(round_messages)
            state.attachments.extend(outcome.attachment for outcome in outcomes)
            if stop := self.stop_reason(outcomes, state):
                return await self.finish(incoming.key, stop, state, usage)
        text = (
            f"I stopped after {self.config.max_rounds} rounds of tool calls without reaching an answer, "
            "so the work was cut short. The tool results so far are attached."
        )
        return await self.finish(incoming.key, text, state, usage, cut_short=True)

    def call_contexts(self, incoming: Incoming, progress: Progress, deadline: TurnDeadline) -> Contexts:
        """Each call's way back to the turn's person; the turn's clock stands still while they answer."""
        owner = f"{incoming.key}|{incoming.user_id}"
        person = person_of(incoming.key, incoming.user_id, self.config.platforms)
        desk = self.desk

        def context(call: ToolCall, spec: ToolSpec) -> CallContext:
            async def ask(draft: InputDraft) -> InputAnswer:
                if desk is None:
                    return InputAnswer(action="cancel")
                with deadline.paused():
                    return await desk.ask(incoming, spec.server, draft, progress)

            async def completed(elicitation_id: str) -> None:
                if desk is not None:
                    await desk.completed(spec.server, elicitation_id)

            return CallContext(
                tool=call.name,
                owner=owner,
                person=person,
                ask=ask,
                report=progress_reporter(call, progress),
                completed=completed,
                # A question in a call's result parks the turn where the store can hold it.
                park=self.screens is not None and desk is not None,
                incoming=incoming,
            )

        return context

    def stop_reason(self, outcomes: Sequence[CallOutcome], state: TurnState) -> str | None:
        """A plain answer when going on would only guess in circles (S10)."""
        refused = [o for o in outcomes if o.outcome == "refused_unavailable"]
        if refused:
            names = sorted({o.message.name or "a tool" for o in refused})
            told = " ".join(
                _one_line(state.failed[name].for_people()) for name in names if name in state.failed
            )
            return f"Sorry — I could not finish this answer. {told}".strip()
        state.argument_errors += sum(1 for o in outcomes if o.outcome == "fix_arguments")
        if state.argument_errors > self.config.max_argument_errors:
            last = next(o.failure for o in reversed(outcomes) if o.outcome == "fix_arguments" and o.failure)
            return (
                "Sorry — I could not call the tools with valid arguments after several tries. "
                + _one_line(last.for_people())
            )
        return None

    async def _complete(
        self,
        prompt: TurnPrompt,
        history: list[ChatMessage],
        tools: Sequence[ToolSpec],
        progress: Progress,
        files: TurnFiles | None = None,
        *,
        llm: LLM | None = None,
    ) -> Completion:
        """One model call within the token budget; on a context-length error, compress and retry once."""
        llm = llm or self.llm
        budget = Budget(
            context_tokens=self.config.context_tokens,
            tools_tokens=estimate_tools_tokens(tools),
            scale=self._token_scale,
        )

        def request_of(squeeze: bool) -> list[ChatMessage]:
            # The files' text and images are put in each time: a refusal of images composes anew.
            messages = files.compose(history) if files is not None else history
            return build_request(prompt.system, messages, budget, squeeze=squeeze, note=prompt.note)

        async def ask(request: list[ChatMessage], squeeze: bool) -> Completion:
            if files is None:
                return await llm.complete(request, tools, progress)
            return await files.complete(llm, request, tools, progress, lambda: request_of(squeeze))

        request = request_of(False)
        try:
            completion = await ask(request, False)
        except ContextTooLong:
            await progress(
                TurnEvent(kind="notice", message="conversation too long for the model, compressing…")
            )
            request = request_of(True)
            completion = await ask(request, True)
        if completion.usage and completion.usage.prompt_tokens:
            estimated = estimate_message_tokens(request) + budget.tools_tokens
            # Learn how our offline estimate compares with the server's own count.
            self._token_scale = min(4.0, max(0.5, completion.usage.prompt_tokens / max(1, estimated)))
        return completion

    async def finish(
        self, key: ConversationKey, text: str, state: TurnState, usage: Usage, *, cut_short: bool = False
    ) -> AgentReply:
        text = text.strip() or "The model returned an empty answer. Please rephrase the question."
        if state.notices:
            text = "\n".join(state.notices) + "\n\n" + text
        if missing := [failure for name, failure in state.failed.items() if name not in text]:
            text += "\n\n" + "\n".join(f"⚠️ {_one_line(failure.for_people())}" for failure in missing)
        if starting := self.host.starting():
            text += f"\n\n⏳ {', '.join(starting)}: still starting, so not used for this answer."
        saved = remembered(state.attachments)
        if saved:
            text += "\n\n" + "\n".join(
                f"🧠 Remembered for {memory.owner}: {memory.text}"
                + (f" ({memory.note})" if memory.note else "")
                for memory in saved
            )
        await self.store.append(key, [ChatMessage(role="assistant", content=text)])
        if state.model is not None:
            logger.info("answered by model %s", state.model)
        return AgentReply(
            text=text,
            attachments=tuple(state.attachments),
            usage=usage,
            cut_short=cut_short,
            remembered=saved,
            model=state.model,
        )

    async def stored_answer(self, incoming: Incoming) -> AgentReply | None:
        """A re-delivered message whose answer is already stored gets that answer, not a second turn."""
        after = await self.store.messages_after_event(incoming.key, incoming.event_id or "")
        finals = [m for m in after if m.role == "assistant" and not m.tool_calls]
        if not finals:
            return None
        attachments = tuple(stored_attachment(call, m) for call, m in stored_results(after))
        return AgentReply(text=finals[0].content or "", attachments=attachments)

    def ended(self, incoming: Incoming, error: LLMError | TurnOverdue, state: TurnState) -> AgentReply:
        """A turn the model failed or whose time ran out: a plain sentence with the tool results so far.

        Not stored: a re-delivery tries again, and the model never reads the apology back as its own."""
        if isinstance(error, LLMError):
            logger.warning("model call failed for %s: %s", incoming.key, error.message)
            text = model_failure(error, incoming, self.config.platforms.get(incoming.key.platform))
        else:
            logger.warning("turn in %s ran out of time: %s", incoming.key, error.message)
            metrics.turn_outcome("timed_out")
            text = overdue(error)
        text = "\n".join([*state.notices, text])
        return AgentReply(text=text, attachments=tuple(state.attachments), failed=True)


def _with_unique_call_ids(message: ChatMessage, history: Sequence[ChatMessage]) -> ChatMessage:
    """Give repeated call ids fresh ones: some servers reuse them per message, and results pair by id."""
    seen = {call.id for m in history for call in m.tool_calls}
    calls = []
    for call in message.tool_calls:
        if not call.id or call.id in seen:
            call = replace(call, id=f"call_{uuid.uuid4().hex[:12]}")
        seen.add(call.id)
        calls.append(call)
    return replace(message, tool_calls=tuple(calls)) if message.tool_calls else message


def _one_line(text: str, limit: int = 300) -> str:
    """The first line of a people text, for a sentence inside the answer."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return truncate(line, limit)[0]
