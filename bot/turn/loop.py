"""The loop of one turn: ask the model, run its tool calls in parallel, persist the round, repeat.

A round whose calls wait for a person (`bot.turn.screen`) comes back as a `WaitingRound`, which
`bot.asks.parking` parks and later resumes here. How turns run (rounds, limits, waits) is `AgentConfig`.
What a round is made of lives beside it: the prompt (`bot.turn.prompt`), the model call
(`bot.turn.model_call`), the screening of calls (`bot.turn.screen`) and the answer (`bot.turn.answers`).
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from bot.budgets.meter import UsageMeter, open_request, settle_request
from bot.budgets.rules import Budgets, Prices
from bot.errors import LLMError, StreamCut, TurnOverdue
from bot.files.desk import FileDesk
from bot.files.intake import FileRules
from bot.files.vision import VisionMode
from bot.mcp.auth.people import person_of
from bot.memory.tools import MemoryTools, read_by_tools
from bot.policy.scopes import Scopes
from bot.schedules.tools import NAMES as SCHEDULE_TOOL_NAMES
from bot.schedules.tools import RUNS_ON
from bot.seams import LLM, ModelChooser, PlacedTools, Store, ToolHost
from bot.store.approvals import ApprovalLedger
from bot.turn.answers import TurnAnswers
from bot.turn.calls import (
    CallOutcome,
    Contexts,
    RoundRunner,
    TurnState,
    Waiting,
    progress_reporter,
)
from bot.turn.deadline import TurnDeadline
from bot.turn.guards import confirm_prompt, triggered_tools
from bot.turn.model_call import ModelCalls
from bot.turn.prompt import turn_prompt
from bot.turn.screen import TurnScreen
from bot.types import (
    AgentReply,
    CallContext,
    ChatMessage,
    ConversationKey,
    Incoming,
    InputAnswer,
    InputDraft,
    Platforms,
    Progress,
    ToolCall,
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
    # Each round's model call, sized to the context as the model's answers taught.
    model_calls: ModelCalls = field(init=False)
    # How each turn's answer is put in words and stored, wherever the turn ends.
    answers: TurnAnswers = field(init=False)

    def __post_init__(self) -> None:
        self.model_calls = ModelCalls(context_tokens=self.config.context_tokens)
        self.answers = TurnAnswers(
            store=self.store,
            host=self.host,
            platforms=self.config.platforms,
            max_argument_errors=self.config.max_argument_errors,
        )

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
        prompt = await turn_prompt(
            incoming,
            system=self.config.system_prompt,
            scopes=self.config.scopes,
            builtins=self.runner.builtins,
            memory=self.memory,
            memory_tokens=int(self.config.context_tokens * self.config.memory_share),
            platforms=self.config.platforms,
        )
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
                    completion = await self.model_calls.complete(
                        self.llm_for(incoming), prompt, [*history, *nudge], tools, progress, files
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
        return self.answers.stop_reason(outcomes, state)

    async def finish(
        self, key: ConversationKey, text: str, state: TurnState, usage: Usage, *, cut_short: bool = False
    ) -> AgentReply:
        """The turn's answer, with its notices and warnings, stored and returned."""
        return await self.answers.finish(key, text, state, usage, cut_short=cut_short)

    async def stored_answer(self, incoming: Incoming) -> AgentReply | None:
        """A re-delivered message whose answer is already stored gets that answer, not a second turn."""
        return await self.answers.stored_answer(incoming)

    def ended(self, incoming: Incoming, error: LLMError | TurnOverdue, state: TurnState) -> AgentReply:
        """A turn the model failed or whose time ran out: a plain sentence with the tool results so far."""
        return self.answers.ended(incoming, error, state)


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
