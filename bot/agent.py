"""The agent: one turn of conversation, from the user's message to the answer (S4–S12).

Adapters call `Agent.reply`; everything platform-specific stays outside. The loop below is the whole
story of a turn: persist, ask the model, run its tool calls in parallel, persist the round, repeat.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bot.asks.approvals import Clock, TurnScreen
from bot.asks.connections import Connections
from bot.asks.inputs import InputDesk, InputStore
from bot.asks.parking import WaitingTurns
from bot.errors import ContextTooLong, LLMError, PromptError, StreamCut, TurnOverdue
from bot.mcp.auth.people import person_of
from bot.model.tokens import estimate_message_tokens, estimate_tools_tokens
from bot.observe import metrics
from bot.observe.log_context import turn_context
from bot.observe.tracing import turn_span
from bot.policy.scopes import Scopes
from bot.seams import LLM, Inbox, PromptHost, ServerStates, Store, ToolHost, TurnLock
from bot.store.approvals import ApprovalLedger
from bot.store.locks import KeyedLocks
from bot.text.render import truncate
from bot.text.scrub import question_too_long, scrub
from bot.turn.apologies import model_failure
from bot.turn.calls import (
    CallOutcome,
    CallSettings,
    Contexts,
    RoundRunner,
    Sleep,
    TurnState,
    Waiting,
    make_attachment,
    progress_reporter,
    stored_arguments,
)
from bot.turn.context import Budget, build_request
from bot.turn.deadline import TurnDeadline
from bot.turn.failures import shown_to_people
from bot.turn.gate import BUSY_REPLY, GateFull, TurnGate, queued_notice
from bot.turn.guards import confirm_prompt, triggered_tools
from bot.types import (
    AgentReply,
    CallContext,
    ChatMessage,
    Completion,
    ConversationKey,
    Incoming,
    InputAnswer,
    InputDraft,
    InputOutcome,
    InputRequest,
    Progress,
    PromptSpec,
    ToolCall,
    ToolSpec,
    TurnEvent,
    Usage,
    no_progress,
)

logger = logging.getLogger(__name__)

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
    calls: CallSettings = field(default_factory=CallSettings)
    # Longer questions are stored but answered with the limit, never sent to the model.
    max_question_chars: int = 20_000
    # Turns running at once across all conversations, and how many more may wait for a slot.
    max_concurrent_turns: int = 16
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


DEFERRED_REPLY = (
    "I'm still waiting for a decision on the tool calls I asked to run for your earlier message; "
    "I'll answer this message right after that."
)
DEFERRED_FOR_ANSWER = (
    "A tool is still waiting for an answer to its question about your earlier message; "
    "I'll answer this message right after that."
)
CUT_OFF_NOTE = (
    "⚠️ The answer was cut off: the model service stopped sending it. Ask again for the whole answer."
)


class Agent(WaitingTurns):
    """Runs turns against a model, a tool host and a store; safe to share across many conversations."""

    def __init__(
        self,
        *,
        llm: LLM,
        host: ToolHost,
        store: Store,
        inbox: Inbox,
        config: AgentConfig | None = None,
        sleep: Sleep = asyncio.sleep,
        turn_lock: TurnLock | None = None,
        approvals: ApprovalLedger | None = None,
        inputs: InputStore | None = None,
        clock: Clock = time.time,
        connections: Connections | None = None,
    ) -> None:
        self.inbox = inbox
        # People's own accounts at per-person servers (sign-in); None when no server needs one.
        self.connections = connections
        self._llm = llm
        self._host = host
        self._store = store
        self._config = config or AgentConfig()
        self._runner = RoundRunner(host, self._config.calls, sleep)
        # The store's lock when processes share it (one turn per conversation across all of them);
        # in memory otherwise.
        self._locks: TurnLock = turn_lock or KeyedLocks()
        self._token_scale = 1.0
        self.gate = TurnGate(limit=self._config.max_concurrent_turns, queue=self._config.turn_queue)
        # Where waiting turns are parked; without it every call runs at once (no approvals).
        self.approvals = approvals
        self._clock = clock
        # Where servers' questions mid-call are shown and answered; without it they get "cancel".
        self.inputs = (
            InputDesk(inputs, clock=clock, timeout=self._config.input_timeout) if inputs is not None else None
        )

    def tools(self, incoming: Incoming | None = None) -> list[ToolSpec]:
        """What the model is offered right now (in the place `incoming` was written, if given)."""
        tools = self._host.list_tools()
        return tools if incoming is None else self._config.scopes.offered(incoming.where(), tools)

    async def reset(self, key: ConversationKey) -> None:
        """Start a new conversation in this thread; the old one stays stored, and a turn of it that
        waits for approval ends there (its open calls count as not approved)."""
        async with self._locks.hold(key):
            if self.approvals is not None:
                await self.approvals.close_parked(key)
            await self._store.reset(key)

    @metrics.turn
    async def reply(self, incoming: Incoming, progress: Progress = no_progress) -> AgentReply:
        """Answer one message. Model and tool failures become a plain answer, never an exception."""
        # Every front end scrubs at its own edge; this one holds for all of them, present and future.
        incoming = replace(incoming, text=scrub(incoming.text), user_id=scrub(incoming.user_id))
        size, limit = len(incoming.text), self._config.max_question_chars
        if size > limit:
            notice = question_too_long(size, limit)
            metrics.turn_outcome("refused_too_long")
            return await self._refuse(incoming, notice, store_notice=True)

        async def tell_place(position: int) -> None:
            await progress(TurnEvent(kind="notice", message=queued_notice(position)))

        # The conversation first, then a slot: turns queued behind another turn of their own thread
        # take no slot, so one busy thread cannot crowd out every other conversation.
        with turn_context(incoming.key), turn_span():
            async with self._locks.hold(incoming.key):
                try:
                    async with self.gate.admit(on_queued=tell_place, patient=incoming.replayed):
                        return await self._reply(incoming, progress)
                except GateFull:
                    logger.warning("too many turns at once; told %s to try again", incoming.key)
                    metrics.turn_outcome("refused_busy")
                    return await self._store_instead(incoming, BUSY_REPLY, store_notice=False)

    async def _refuse(self, incoming: Incoming, notice: str, *, store_notice: bool) -> AgentReply:
        """Store the message and answer `notice` instead of a turn, in the thread's order."""
        async with self._locks.hold(incoming.key):
            return await self._store_instead(incoming, notice, store_notice=store_notice)

    async def _store_instead(self, incoming: Incoming, notice: str, *, store_notice: bool) -> AgentReply:
        """Store the message (nothing a person writes is lost) and answer `notice`; the caller holds
        the conversation. A busy notice is not stored: a re-delivery then gets a real answer."""
        if self.approvals is not None and await self.approvals.waiting_in(incoming.key) is not None:
            # Inside a parked turn's round nothing may be written: the message waits behind it.
            await self.approvals.defer(incoming)
            return AgentReply(text=await self._deferred_text(incoming.key), deferred=True)
        messages = [ChatMessage(role="user", content=incoming.text)]
        if store_notice:
            messages.append(ChatMessage(role="assistant", content=notice))
        if not await self._store.append(incoming.key, messages, event_id=incoming.event_id):
            stored = await self._stored_answer(incoming)
            if stored is not None:
                return stored
        return AgentReply(text=notice, failed=True)

    async def _deferred_text(self, key: ConversationKey) -> str:
        """What a message waiting behind a parked turn is told: what that turn waits for."""
        assert self.approvals is not None
        request_id = await self.approvals.waiting_in(key)
        found = await self.approvals.prompt(request_id) if request_id is not None else None
        if found is not None and not found[0].calls:
            return DEFERRED_FOR_ANSWER
        return DEFERRED_REPLY

    async def _reply(self, incoming: Incoming, progress: Progress) -> AgentReply:
        """One turn; the caller holds the conversation and a slot."""
        if self.approvals is not None and await self.approvals.waiting_in(incoming.key) is not None:
            replayed = await self._parked_by(incoming)
            if replayed is not None:
                return replayed
            # The thread's turn is parked: this message waits behind it, stored, never dropped.
            await self.approvals.defer(incoming)
            return AgentReply(text=await self._deferred_text(incoming.key), deferred=True)
        user = ChatMessage(role="user", content=incoming.text)
        if not await self._store.append(incoming.key, [user], event_id=incoming.event_id):
            stored = await self._stored_answer(incoming)
            if stored is not None:
                return stored
        history = await self._store.history(incoming.key)
        state = TurnState()
        deadline = TurnDeadline(self._config.turn_deadline)
        try:
            return await self._loop(incoming, history, state, progress, deadline=deadline)
        except LLMError as exc:
            # Not stored: the apology is no answer, so a re-delivery of this message tries again,
            # and the model never reads it back as something it said.
            logger.warning("model call failed for %s: %s", incoming.key, exc.message)
            text = model_failure(exc, incoming)
            return AgentReply(text=text, attachments=tuple(state.attachments), failed=True)
        except TurnOverdue as exc:
            # Not stored either; the round that was cut off was not stored (as for a cancelled turn).
            return self._overdue(incoming, exc, state)

    async def _loop(
        self,
        incoming: Incoming,
        history: list[ChatMessage],
        state: TurnState,
        progress: Progress,
        *,
        deadline: TurnDeadline,
        first_round: int = 0,
        usage: Usage | None = None,
    ) -> AgentReply:
        usage = usage or Usage()
        nudge: list[ChatMessage] = []
        for round_index in range(first_round, self._config.max_rounds):
            # Each round sees the tools as they are now: a server may change its list mid-turn.
            tools = self.tools(incoming)
            # Also tells a front end that text shown for an earlier round is superseded.
            await progress(TurnEvent(kind="thinking", message="thinking…"))
            try:
                async with deadline.running("model"):
                    completion = await self._complete([*history, *nudge], tools, progress)
            except StreamCut as cut:
                # Stored as the answer: people saw it, and the transcript stays user → assistant.
                logger.warning("answer cut off for %s: %s", incoming.key, cut.message)
                text = f"{cut.partial.rstrip()}\n\n{CUT_OFF_NOTE}"
                return await self._finish(incoming.key, text, state, usage, cut_short=True)
            usage += completion.usage or Usage()
            answer = _with_unique_call_ids(completion.message, history)
            if not answer.tool_calls:
                hits = [] if nudge or state.attachments else triggered_tools(incoming.text, tools)
                if hits:
                    # The draft and the nudge are not persisted: only what the model settles on is.
                    nudge = [answer, ChatMessage(role="user", content=confirm_prompt(hits))]
                    continue
                return await self._finish(incoming.key, answer.content or "", state, usage)
            nudge = []
            screen = TurnScreen(store=self.approvals, incoming=incoming) if self.approvals else None
            contexts = self._call_contexts(incoming, progress, deadline)
            async with deadline.running("tools"):
                results = await self._runner.run(answer.tool_calls, tools, state, progress, screen, contexts)
            if screen is not None:
                await screen.store.record_audit(incoming.key, screen.audit)
            waiting = [r for r in results if isinstance(r, Waiting)]
            if waiting:
                return await self._park(
                    incoming, answer, results, waiting, state, usage, round_index + 1, progress
                )
            outcomes = [r for r in results if isinstance(r, CallOutcome)]
            round_messages = [answer, *(outcome.message for outcome in outcomes)]
            await self._store.append(incoming.key, round_messages)
            history.extend(round_messages)
            state.attachments.extend(outcome.attachment for outcome in outcomes)
            stop = self._stop_reason(outcomes, state)
            if stop:
                return await self._finish(incoming.key, stop, state, usage)
        text = (
            f"I stopped after {self._config.max_rounds} rounds of tool calls without reaching an answer, "
            "so the work was cut short. The tool results so far are attached."
        )
        return await self._finish(incoming.key, text, state, usage, cut_short=True)

    def _call_contexts(self, incoming: Incoming, progress: Progress, deadline: TurnDeadline) -> Contexts:
        """Each call's way back to the person whose message started the turn; the turn's clock
        stands still while that person answers a question."""
        owner = f"{incoming.key}|{incoming.user_id}"
        person = person_of(incoming.key, incoming.user_id)
        desk = self.inputs

        def context(call: ToolCall, spec: ToolSpec) -> CallContext:
            async def ask(draft: InputDraft) -> InputAnswer:
                if desk is None:
                    return InputAnswer(action="cancel")
                with deadline.paused():
                    return await desk.ask(
                        key=incoming.key,
                        user_id=incoming.user_id,
                        server=spec.server,
                        draft=draft,
                        progress=progress,
                    )

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
                park=self.approvals is not None and desk is not None,
            )

        return context

    def server_states(self) -> dict[str, bool]:
        """Each MCP server this agent's host runs, and whether it is connected now."""
        return self._host.server_states() if isinstance(self._host, ServerStates) else {}

    def prompts(self, incoming: Incoming | None = None) -> list[PromptSpec]:
        """The prompts people may start here (a place may use a server's prompts when it may use the
        server: scopes name tools, and a prompt is judged as a tool of the same name)."""
        host = self._host
        if not isinstance(host, PromptHost):
            return []
        prompts = host.list_prompts()
        return prompts if incoming is None else self._config.scopes.offered(incoming.where(), prompts)

    async def prompt_question(self, incoming: Incoming, name: str, arguments: dict[str, str]) -> str:
        """The text a prompt starts the turn with (the front end then calls `reply` with it).

        Raises `PromptError` with a message for the person when it cannot be started here."""
        offered = {p.name: p for p in self.prompts(incoming)}
        if name not in offered or not isinstance(self._host, PromptHost):
            known = ", ".join(sorted(offered)) or "none here"
            raise PromptError(f"There is no prompt named {name!r} here. Prompts: {known}.")
        return await self._host.get_prompt(name, arguments)

    async def complete_prompt_argument(
        self, name: str, argument: str, value: str, known: dict[str, str] | None = None
    ) -> list[str]:
        if not isinstance(self._host, PromptHost):
            return []
        return await self._host.complete_prompt_argument(name, argument, value, known)

    async def open_input(self, request_id: str, user_id: str) -> InputOutcome:
        """A click on a server's question: the request when this person may answer it, or why not."""
        if self.inputs is None:
            return InputOutcome(changed=False, request=None, note="Questions from tools are not enabled.")
        return await self.inputs.open(request_id, user_id)

    async def input_posted(self, request_id: str, ref: str) -> None:
        """Remember where a question was shown (platform-specific, e.g. channel and message id):
        `InputRequest.message_ref` then carries it to whichever process updates that message."""
        if self.inputs is not None:
            await self.inputs.posted(request_id, ref)

    async def answer_input(self, request_id: str, user_id: str, answer: InputAnswer) -> InputOutcome:
        """A submitted form, a decline or a dismissal of a server's question (see `InputDesk.answer`)."""
        if self.inputs is None:
            return InputOutcome(changed=False, request=None, note="Questions from tools are not enabled.")
        return await self.inputs.answer(request_id, user_id, answer)

    async def parked_questions(self, request_id: str) -> list[InputRequest]:
        """The open questions a parked turn waits on (empty when questions from tools are off), for
        a front end to ask again after it stopped before they were answered."""
        if self.inputs is None:
            return []
        return await self.inputs.parked_questions(request_id)

    def _stop_reason(self, outcomes: Sequence[CallOutcome], state: TurnState) -> str | None:
        """A plain answer when going on would only guess in circles (S10)."""
        refused = [o for o in outcomes if o.outcome == "refused_unavailable"]
        if refused:
            names = sorted({o.message.name or "a tool" for o in refused})
            told = " ".join(
                _one_line(state.failed[name].for_people()) for name in names if name in state.failed
            )
            return f"Sorry — I could not finish this answer. {told}".strip()
        state.argument_errors += sum(1 for o in outcomes if o.outcome == "fix_arguments")
        if state.argument_errors > self._config.max_argument_errors:
            last = next(o.failure for o in reversed(outcomes) if o.outcome == "fix_arguments" and o.failure)
            return (
                "Sorry — I could not call the tools with valid arguments after several tries. "
                + _one_line(last.for_people())
            )
        return None

    async def _complete(
        self, history: list[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        """One model call within the token budget; on a context-length error, compress and retry once."""
        budget = Budget(
            context_tokens=self._config.context_tokens,
            tools_tokens=estimate_tools_tokens(tools),
            scale=self._token_scale,
        )
        request = build_request(self._config.system_prompt, history, budget)
        try:
            completion = await self._llm.complete(request, tools, progress)
        except ContextTooLong:
            await progress(
                TurnEvent(kind="notice", message="conversation too long for the model, compressing…")
            )
            request = build_request(self._config.system_prompt, history, budget, squeeze=True)
            completion = await self._llm.complete(request, tools, progress)
        if completion.usage and completion.usage.prompt_tokens:
            estimated = estimate_message_tokens(request) + budget.tools_tokens
            # Learn how our offline estimate compares with the server's own count.
            self._token_scale = min(4.0, max(0.5, completion.usage.prompt_tokens / max(1, estimated)))
        return completion

    async def _finish(
        self, key: ConversationKey, text: str, state: TurnState, usage: Usage, *, cut_short: bool = False
    ) -> AgentReply:
        text = text.strip() or "The model returned an empty answer. Please rephrase the question."
        missing = [failure for name, failure in state.failed.items() if name not in text]
        if missing:
            text += "\n\n" + "\n".join(f"⚠️ {_one_line(failure.for_people())}" for failure in missing)
        starting = self._host.starting()
        if starting:
            text += f"\n\n⏳ {', '.join(starting)}: still starting, so not used for this answer."
        await self._store.append(key, [ChatMessage(role="assistant", content=text)])
        return AgentReply(text=text, attachments=tuple(state.attachments), usage=usage, cut_short=cut_short)

    async def _stored_answer(self, incoming: Incoming) -> AgentReply | None:
        """A re-delivered message whose answer is already stored gets that answer, not a second turn."""
        after = await self._store.messages_after_event(incoming.key, incoming.event_id or "")
        finals = [m for m in after if m.role == "assistant" and not m.tool_calls]
        if not finals:
            return None
        calls = {call.id: call for m in after for call in m.tool_calls}
        limit = self._config.calls.attachment_chars
        attachments = tuple(
            make_attachment(
                calls[m.tool_call_id],
                stored_arguments(calls[m.tool_call_id].arguments),
                # The store keeps what the model read; people get a failure's own text.
                shown_to_people(m),
                is_error=m.is_error,
                latency_ms=m.latency_ms or 0.0,
                limit=limit,
            )
            for m in after
            if m.role == "tool" and m.tool_call_id in calls
        )
        return AgentReply(text=finals[0].content or "", attachments=attachments)


def _with_unique_call_ids(message: ChatMessage, history: Sequence[ChatMessage]) -> ChatMessage:
    """Give repeated call ids fresh ones: some servers number calls per message (call_0 every round),
    and a result must pair with exactly one call, in the store and in what the model reads back."""
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
