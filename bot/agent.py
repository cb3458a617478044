"""The agent, the core's façade: one turn of conversation, from the user's message to the answer (S4–S12).

It stores the message, runs the turn's loop (`bot.turn.loop`), hands a round that waits for a person
to its parking (`bot.asks.parking`), and takes that person's answer to any ask to the ledger of its
kind, so a front end answers every ask one way; everything platform-specific stays in the adapters.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from bot.asks import inputs as _inputs
from bot.asks import parking as _parking
from bot.asks.connections import Connections as Connections
from bot.asks.connections import ConnectStart
from bot.asks.inputs import Clock, InputDesk
from bot.asks.parking import Parking
from bot.budgets.meter import usage_meter
from bot.errors import (
    AskError,
    AskExpired,
    AskGone,
    LLMError,
    PromptError,
    ScheduleError,
    SignInFailed,
    TurnOverdue,
)
from bot.files.desk import file_desk
from bot.files.intake import file_ids, with_listing
from bot.files.tools import FILES_SERVER
from bot.installs import Install as Install
from bot.installs import WorkspaceInstalls as WorkspaceInstalls
from bot.memory.scope import is_private, turn_scope
from bot.memory.tools import MEMORY_SERVER, MemoryTools, may_forget
from bot.model.concurrency import ConcurrencyLimits
from bot.observe import metrics
from bot.observe.log_context import turn_context
from bot.observe.tracing import turn_span
from bot.schedules import timing as _timing
from bot.schedules.runner import CADENCE, Start
from bot.schedules.runner import RunOutcome as RunOutcome
from bot.schedules.runner import ScheduleRunner as ScheduleRunner
from bot.schedules.runner import SlotJobs as SlotJobs
from bot.schedules.runner import Tick as Tick
from bot.schedules.timing import zone
from bot.schedules.tools import SCHEDULES_SERVER, ScheduleTools
from bot.schedules.zones import UTC_NAME, checked, local_time_zone
from bot.seams import LLM, PromptHost, ServerStates, Store, ToolHost, TurnLock
from bot.seams import Inbox as Inbox
from bot.seams import PostRecords as PostRecords
from bot.store.approvals import ApprovalLedger
from bot.store.base import ConversationStore
from bot.store.feedback import Feedback as Feedback
from bot.store.inputs import InputLedger
from bot.store.locks import KeyedLocks as KeyedLocks
from bot.store.memories import MemoryLedger
from bot.store.person_data import Forgotten as Forgotten
from bot.store.person_data import PersonLedger
from bot.store.person_settings import PersonSettingsLedger
from bot.store.schedules import ScheduleLedger
from bot.text.scrubbing import question_too_long, scrub
from bot.turn.calls import RoundRunner, Sleep, TurnState
from bot.turn.deadline import TurnDeadline
from bot.turn.failures import shown_to_people as shown_to_people
from bot.turn.gate import BUSY_REPLY, GateFull, TurnGate, queued_notice
from bot.turn.loop import DEFAULT_SYSTEM_PROMPT as DEFAULT_SYSTEM_PROMPT
from bot.turn.loop import AgentConfig as AgentConfig
from bot.turn.loop import TurnLoop
from bot.types import (
    AgentReply,
    Answer,
    Answered,
    ApprovalPrompt,
    Approve,
    Ask,
    AuditEntry,
    Author,
    Cancel,
    ChatMessage,
    ConversationKey,
    Decline,
    Deny,
    Incoming,
    InputAction,
    InputAnswer,
    InputOutcome,
    InputRequest,
    Memory,
    Person,
    Place,
    Progress,
    PromptSpec,
    RememberedApproval,
    Schedule,
    ScheduleChange,
    ScheduleRun,
    SignInFinished,
    StopBoard,
    Submit,
    TurnEvent,
    UndoOutcome,
    Usage,
    UsageReport,
    no_progress,
)

if TYPE_CHECKING:  # only a nerve with per-person servers loads the OAuth client: front ends type with it
    from bot.mcp.auth.sign_ins import Connection as Connection

logger = logging.getLogger(__name__)

# The front ends reach the core through this module (and `bot.runtime`, `bot.types`, `bot.text`): the
# names imported above "as" themselves, and the ones below, are here for them, so the modules behind
# the façade can move without a front end noticing. The notes a person is shown when an answer came
# too late or twice:
APPROVAL_GONE = _parking.GONE
INPUT_GONE = _inputs.GONE
INPUT_EXPIRED = _inputs.EXPIRED
INPUT_SETTLED = _inputs.SETTLED
# When a schedule's slots fall and how a person reads one ("Mon 7 Dec 09:00 CET"), for the lists.
upcoming_runs = _timing.upcoming
local_time = _timing.local_text


NO_QUESTIONS = "Questions from tools are not enabled."
NO_SIGN_INS = "No server here asks people to sign in with their own account."
_ACTIONS: dict[type, InputAction] = {Decline: "decline", Cancel: "cancel"}

DEFERRED_REPLY = (
    "I'm still waiting for a decision on the tool calls I asked to run for your earlier message; "
    "I'll answer this message right after that."
)
DEFERRED_FOR_ANSWER = (
    "A tool is still waiting for an answer to its question about your earlier message; "
    "I'll answer this message right after that."
)

FILES_NOT_KEPT = "The files you shared with it are not kept while it waits: share them again then."


def _refuse_late(note: str | None, gone: str, expired: str, request: InputRequest | None = None) -> None:
    """An ask that is gone or expired is an `AskError` to the front end, whatever its kind."""
    if note == gone:
        raise AskGone(gone, request=request)
    if note == expired:
        raise AskExpired(expired, request=request)


class Agent:
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
        inputs: InputLedger | None = None,
        clock: Clock = time.time,
        connections: Connections | None = None,
        memories: MemoryLedger | None = None,
        people: PersonLedger | None = None,
        schedules: ScheduleLedger | None = None,
        person_settings: PersonSettingsLedger | None = None,
        limits: ConcurrencyLimits | None = None,
        installs: WorkspaceInstalls | None = None,
    ) -> None:
        self.inbox = inbox
        # The bot's installs in many workspaces (a platform's install flow), sealed; None without
        # NERVE_SECRET_KEY.
        self.installs = installs
        # People's schedules (their prompts run later); the store's own ledger by default.
        self._schedules = (
            schedules if schedules is not None else store if isinstance(store, ScheduleLedger) else None
        )
        # The runners started here, woken when a schedule is added so a near slot is not late.
        # (Weakly: a front end's runner that has stopped is not kept for good.)
        self._runners: weakref.WeakSet[ScheduleRunner] = weakref.WeakSet()
        # What is stored about each person, to export or forget; the store's own ledger by default.
        self._people = people if people is not None else store if isinstance(store, PersonLedger) else None
        # People's own accounts at per-person servers (sign-in); None when no server needs one.
        self.connections = connections
        self._host = host
        self._store = store
        self._config = config or AgentConfig()
        # The store's lock when processes share it (one turn per conversation across all of them);
        # in memory otherwise.
        self._locks: TurnLock = turn_lock or KeyedLocks()
        # Stop requests between the processes that share the turns (the store's own lock), so a stop
        # pressed in one reaches a turn running in another; None when turns are this process's alone.
        shared = isinstance(store, ConversationStore) and store.turn_lock is turn_lock
        self.stop_board: StopBoard | None = store if isinstance(store, ConversationStore) and shared else None
        # The model's limit on turns at once, learnt from its answers, when the model client reports
        # each request to `limits`; else the configured number, fixed.
        self.limits = limits
        limit = limits.of(self._config.model) if limits is not None else self._config.max_concurrent_turns
        self.gate = TurnGate(limit=limit, queue=self._config.turn_queue)
        # Where servers' questions mid-call are shown and answered; without it they get "cancel".
        self.inputs = (
            InputDesk(inputs, clock=clock, timeout=self._config.input_timeout) if inputs is not None else None
        )
        # The built-in memory tools, and the memories each turn is sent; none without a ledger.
        self.memory = (
            MemoryTools(
                memories,
                platforms=self._config.platforms,
                admins=self._config.admins,
                scopes=self._config.scopes,
            )
            if memories is not None
            else None
        )
        # A person's own settings (their time zone); the store's own ledger by default.
        self._settings = (
            person_settings
            if person_settings is not None
            else store
            if isinstance(store, PersonSettingsLedger)
            else None
        )
        # The built-in schedule tools: only where a person can be asked, since nothing is scheduled
        # without its person's confirmation.
        self.schedule_tools = (
            ScheduleTools(
                schedules,
                platforms=self._config.platforms,
                zone_of=self._turn_zone,
                clock=clock,
                per_person=self._config.schedules_per_person,
                confirm_late=self._config.schedule_grace,
                on_added=lambda _schedule: self.wake_schedules(),
                runs_on=self._config.schedules_run_on,
            )
            if schedules is not None and approvals is not None
            else None
        )
        builtins: dict[str, ToolHost] = {}
        if self.memory is not None:
            builtins[MEMORY_SERVER] = self.memory
        if self.schedule_tools is not None:
            builtins[SCHEDULES_SERVER] = self.schedule_tools
        # People's shared files, read and kept with their conversation; only named without a store.
        made = self._config
        self.files = file_desk(store, made.files, made.vision, made.model, made.context_tokens)
        if self.files is not None:
            builtins[FILES_SERVER] = self.files.tools
        self._loop = TurnLoop(
            llm=llm,
            host=host,
            store=store,
            config=self._config,
            runner=RoundRunner(host, sleep, builtins=builtins),
            screens=approvals,
            desk=self.inputs,
            memory=self.memory,
            files=self.files,
            meter=usage_meter(store, self._config, clock),
        )
        # Where waiting turns are parked; without a ledger every call runs at once (no approvals).
        self._parking = Parking(
            loop=self._loop, locks=self._locks, clock=clock, approvals=approvals, inputs=self.inputs
        )
        self.approvals = approvals
        # Parked turns as the front ends drive them: deny what nobody can be asked about, find what
        # is due or was left at a stop, and go on with a turn once every call is decided.
        self.deny_unasked = self._parking.deny_unasked
        self.expire_due = self._parking.expire_due
        self.recover_parked = self._parking.recover_parked
        self.resume = self._parking.resume
        # What the model is offered right now (in the place an incoming message was written, if given).
        self.tools = self._loop.tools

    async def time_zone_of(self, person: Person, hint: str | None = None) -> str:
        """The IANA zone `person`'s schedules are read and shown in: the one they set, else `hint` (the
        zone their platform reports for them, when it is a real one), else the platform's default
        (the machine's own on a platform without channels, the terminal), else UTC."""
        if self._settings is not None and (chosen := checked(await self._settings.time_zone(person.id))):
            return chosen
        if found := checked(hint):
            return found
        platform = self._config.platforms.get(person.platform)
        return local_time_zone() if platform is not None and not platform.channels else UTC_NAME

    async def set_time_zone(self, person: Person, name: str | None) -> str:
        """Set `person`'s zone (None or "": back to the default); the zone now in effect.
        `ScheduleError` (its message says what to write) when `name` is no IANA zone."""
        if self._settings is None:
            raise ScheduleError("time zones cannot be set here: there is no store", field="timezone")
        chosen = name.strip() if name and name.strip() else None
        if chosen is not None:
            zone(chosen)
        await self._settings.set_time_zone(person.id, chosen)
        return await self.time_zone_of(person)

    async def _turn_zone(self, incoming: Incoming) -> str:
        return await self.time_zone_of(self.person(incoming.key, incoming.user_id), incoming.time_zone)

    async def memories(self, incoming: Incoming) -> list[Memory]:
        """What a person may see and manage where `incoming` was written: all their own memories
        (shown to them alone) and the place's."""
        if self.memory is None:
            return []
        scope = turn_scope(incoming, self._config.platforms)
        return await self.memory.ledger.memories_of(person=scope.person, place=scope.place)

    async def forget_memory(self, incoming: Incoming, memory_id: str) -> Memory | None:
        """Forget one memory for the person of `incoming` (an Undo, a list's button); None when it is
        not theirs to forget: another person's, or a place memory someone else wrote (admins may)."""
        if self.memory is None:
            return None
        scope = turn_scope(incoming, self._config.platforms)
        memory = await self.memory.ledger.memory(memory_id)
        admin = incoming.user_id in self._config.admins
        if memory is None or not may_forget(memory, scope, admin):
            return None
        return memory if await self.memory.ledger.delete_memory(memory.id) else None

    async def use_memory_anywhere(self, incoming: Incoming, memory_id: str, anywhere: bool) -> bool:
        """Let one of the person's own memories be used in shared places too (or no longer)."""
        if self.memory is None:
            return False
        scope = turn_scope(incoming, self._config.platforms)
        memory = await self.memory.ledger.memory(memory_id)
        if memory is None or memory.kind != "person" or memory.subject != scope.person:
            return False
        return await self.memory.ledger.set_memory_anywhere(memory.id, anywhere)

    async def undo_memory(self, incoming: Incoming, memory_id: str) -> UndoOutcome:
        """An Undo pressed under a reply: forget the memory for whoever pressed it, and say why not
        when it was forgotten already ("gone") or is not theirs to forget ("not_yours")."""
        if self.memory is None or await self.memory.ledger.memory(memory_id) is None:
            return "gone"
        return "forgotten" if await self.forget_memory(incoming, memory_id) is not None else "not_yours"

    async def forget_my_memories(self, incoming: Incoming) -> int:
        """Forget every personal memory of the person of `incoming`; how many there were."""
        if self.memory is None:
            return 0
        scope = turn_scope(incoming, self._config.platforms)
        return await self.memory.ledger.delete_memories_of(scope.person)

    async def usage(self, incoming: Incoming) -> UsageReport | None:
        """The person's use today and this month with their limits (an admin's report adds the place's
        and the workspace's); None where the store keeps no usage."""
        meter = self._loop.meter
        return None if meter is None else await meter.report(incoming)

    async def message_kept(self, key: ConversationKey, event_id: str) -> bool:
        """Whether the person's message of `event_id` is stored in its thread: a turn stopped before
        it began (waiting for a slot) stored nothing, and its message is not answered later."""
        return await self._store.holds_event(key, event_id)

    async def reset(self, key: ConversationKey) -> None:
        """Start a new conversation in this thread; the old one stays stored, its parked turn ends."""
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
            metrics.turn_outcome("refused_too_long")
            async with self._locks.hold(incoming.key):
                return await self._store_instead(incoming, question_too_long(size, limit), store_notice=True)

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

    async def _store_instead(self, incoming: Incoming, notice: str, *, store_notice: bool) -> AgentReply:
        """Store the message (none is lost) and answer `notice`, unstored when busy so a retry is answered."""
        if self.approvals is not None and await self.approvals.waiting_in(incoming.key) is not None:
            # Inside a parked turn's round nothing may be written: the message waits behind it.
            return await self._defer(incoming)
        # Stored as a turn stores it, each shared file named with its id, so none is lost.
        ids = file_ids(incoming)
        messages = [ChatMessage(role="user", content=with_listing(incoming, ids), files=ids)]
        if store_notice:
            messages.append(ChatMessage(role="assistant", content=notice))
        return await self._stored_again(incoming, messages) or AgentReply(text=notice, failed=True)

    async def _defer(self, incoming: Incoming) -> AgentReply:
        """Keep a message behind the thread's parked turn, telling its writer what that turn waits for."""
        assert self.approvals is not None
        await self.approvals.defer(incoming)
        found = await self.parked_in(incoming.key)
        text = DEFERRED_FOR_ANSWER if found is not None and not found[0].calls else DEFERRED_REPLY
        if incoming.files:  # a waiting message keeps its text only: a platform's fetch is not stored
            text += f" {FILES_NOT_KEPT}"
        return AgentReply(text=text, deferred=True)

    async def _stored_again(self, incoming: Incoming, messages: list[ChatMessage]) -> AgentReply | None:
        """Store the message; for one delivered again whose answer is stored already, that answer."""
        author = self._author(incoming)
        if await self._store.append(incoming.key, messages, event_id=incoming.event_id, author=author):
            return None
        return await self._loop.stored_answer(incoming)

    def _author(self, incoming: Incoming) -> Author:
        """Who wrote a message, and whether where it was written is theirs alone (a DM, or a platform
        without channels such as the terminal), kept with it for the person's data rights."""
        platforms = self._config.platforms
        person = Person.of(incoming.key, incoming.user_id, platforms)
        private = is_private(incoming.where(), platforms)
        return Author(person=person.id, user_id=incoming.user_id, private=private)

    async def _reply(self, incoming: Incoming, progress: Progress) -> AgentReply:
        """One turn; the caller holds the conversation and a slot."""
        if self.approvals is not None and await self.approvals.waiting_in(incoming.key) is not None:
            # A replay of the message the parked turn waits on gets its request again; others wait behind it.
            return await self._parking.parked_by(incoming) or await self._defer(incoming)
        # The message is stored first, each shared file named in it, before any file is fetched.
        ids = file_ids(incoming)
        message = ChatMessage(role="user", content=with_listing(incoming, ids), files=ids)
        if stored := await self._stored_again(incoming, [message]):
            return stored
        state = TurnState()
        if self.files is not None and ids:
            intake = await self.files.take_in(incoming, ids, self._author(incoming).person, progress)
            state.notices.extend(intake.notices)
            if not intake.read and not incoming.text.strip():  # nothing to answer but why
                return await self._loop.finish(incoming.key, "\n".join(intake.notices), TurnState(), Usage())
        history = await self._store.history(incoming.key)
        deadline = TurnDeadline(self._config.turn_deadline)
        try:
            result = await self._loop.run(incoming, history, state, progress, deadline=deadline)
            return await self._parking.settle(result, progress)
        except (LLMError, TurnOverdue) as exc:
            return self._loop.ended(incoming, exc, state)

    def server_states(self) -> dict[str, bool]:
        return self._host.server_states() if isinstance(self._host, ServerStates) else {}

    def prompts(self, incoming: Incoming | None = None) -> list[PromptSpec]:
        """The prompts people may start here: scopes judge a prompt as a tool of the same name."""
        if not isinstance(self._host, PromptHost):
            return []
        prompts = self._host.list_prompts()
        return prompts if incoming is None else self._config.scopes.offered(incoming.where(), prompts)

    async def prompt_question(self, incoming: Incoming, name: str, arguments: dict[str, str]) -> str:
        """The text a prompt starts the turn with; `PromptError` when it cannot be started here."""
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
        """A click on a server's question: the request when this person may answer it now, or why not."""
        if self.inputs is None:
            return InputOutcome(changed=False, request=None, note=NO_QUESTIONS)
        return await self.inputs.open(request_id, user_id)

    async def ask_posted(self, ask: Ask, ref: str) -> None:
        """Remember where an ask was shown, for whichever process redraws it (sign-ins are never redrawn)."""
        if ask.approval is not None and self.approvals is not None:
            await self.approvals.set_message_ref(ask.id, ref)
        elif ask.input is not None and self.inputs is not None:
            await self.inputs.store.set_input_message_ref(ask.id, ref)

    async def parked_questions(self, request_id: str) -> list[InputRequest]:
        """The open questions a parked turn waits on, for a front end that stopped to ask again."""
        if self.inputs is None:
            return []
        return await self.inputs.store.open_parked_questions(request_id)

    async def deferred_replies(
        self, key: ConversationKey, progress: Progress = no_progress
    ) -> AsyncIterator[tuple[Incoming, AgentReply]]:
        """Answer, in order, the messages that waited behind a parked turn; stop after one that parks."""
        if self.approvals is None:
            return
        while (item := await self.approvals.next_deferred(key)) is not None:
            deferred_id, incoming = item
            if await self.approvals.waiting_in(key) is not None:
                return
            reply = await self.reply(incoming, progress)
            await self.approvals.drop_deferred(deferred_id)
            yield incoming, reply
            if reply.waiting:
                return

    async def answer(self, ask_id: str, person: str, answer: Answer) -> Answered:
        """Apply `answer` from `person` to the ask `ask_id`; `AskError` when it is gone or expired."""
        if isinstance(answer, Approve | Deny):
            decision = await self._parking.decide(ask_id, person, answer)
            _refuse_late(decision.note, _parking.GONE, _parking.EXPIRED)
            resume = (ask_id,) if decision.ready else ()
            return Answered(changed=decision.changed, note=decision.note, resume=resume, decision=decision)
        if isinstance(answer, SignInFinished):
            # The sign-in's single-use state was bound to its person when it was started, so the
            # browser that brings it back signs in that person and no one else.
            if self.connections is None:
                raise AskGone(NO_SIGN_INS)
            try:
                signed = await self.connections.sign_ins.complete(
                    ask_id, answer.code, answer.iss, answer.error
                )
            except SignInFailed as exc:  # refused, already used or expired: the person gets a new link
                raise AskError(exc.message) from exc
            return Answered(changed=True, resume=signed.request_ids, signed_in=signed)
        if self.inputs is None:
            raise AskGone(NO_QUESTIONS)
        content = answer.values if isinstance(answer, Submit) else None
        reply = InputAnswer(action=_ACTIONS.get(type(answer), "accept"), content=content)
        outcome = await self.inputs.answer(ask_id, person, reply)
        _refuse_late(outcome.note, _inputs.GONE, _inputs.EXPIRED, outcome.request)
        return Answered(
            changed=outcome.changed,
            note=outcome.note,
            errors=outcome.errors,
            resume=(outcome.resume,) if outcome.resume is not None else (),
            input=outcome,
        )

    async def parked_in(self, key: ConversationKey) -> tuple[ApprovalPrompt, str] | None:
        """The turn this thread is parked on, with its status, for a front end without an ask in hand."""
        if self.approvals is None or (request_id := await self.approvals.waiting_in(key)) is None:
            return None
        return await self.parked(request_id)

    async def parked(self, request_id: str) -> tuple[ApprovalPrompt, str] | None:
        return await self.approvals.prompt(request_id) if self.approvals is not None else None

    async def threads_with_deferred(self, platform: str | None = None) -> list[ConversationKey]:
        """At start-up: the threads whose messages wait behind a turn that is no longer parked."""
        return await self.approvals.threads_with_deferred(platform) if self.approvals is not None else []

    @property
    def approvals_on(self) -> bool:
        return self.approvals is not None

    async def remembered_approvals(self) -> list[RememberedApproval]:
        return await self.approvals.remembered_approvals() if self.approvals is not None else []

    async def revoke_approval(self, place: str, server: str, tool: str) -> bool:
        """Forget that `tool` of `server` is always allowed in `place`; False when it was not."""
        return await self.approvals.revoke(place, server, tool) if self.approvals is not None else False

    async def audit_log(self, key: ConversationKey) -> list[AuditEntry]:
        """Who decided each tool call of the thread's active conversation, oldest first."""
        return await self.approvals.audit_log(key) if self.approvals is not None else []

    # People's own accounts at per-person servers: what a front end's connection commands need, so
    # it asks the façade rather than holding the connections itself.

    def sign_in_servers(self) -> list[str]:
        return self.connections.servers if self.connections is not None else []

    async def connect(self, key: ConversationKey, user_id: str, server: str) -> ConnectStart:
        """Start `user_id`'s sign-in to `server`: a link only they may see, or why there is none."""
        if self.connections is None:
            return ConnectStart(note=NO_SIGN_INS)
        return await self.connections.connect(key, user_id, server)

    async def disconnect(self, key: ConversationKey, user_id: str, server: str) -> bool:
        """Revoke and forget `user_id`'s connection to `server`; False when there was none."""
        return await self.connections.disconnect(key, user_id, server) if self.connections else False

    async def connected(self, key: ConversationKey, user_id: str) -> list[Connection]:
        """The servers `user_id` has connected with their own account, and since when."""
        return await self.connections.of(key, user_id) if self.connections is not None else []

    # A person's data rights. Front ends name the person as they have them: where they wrote (the
    # key's platform and workspace) and their platform's user id; the person is the same in every
    # workspace where the platform's user ids are global. `nerve forget` and `nerve export` name
    # them by id instead (`Person.named`).

    def person(self, key: ConversationKey, user_id: str) -> Person:
        return Person.of(key, user_id, self._config.platforms)

    async def forget_person(self, key: ConversationKey, user_id: str) -> Forgotten:
        """Delete everything stored about this person (see `bot.store.person_data`), their sign-ins
        revoked at the servers first; the counts say what went. Nothing stored gives zeros. It waits
        for the turns running in the threads they wrote in: call it outside any turn."""
        if self._people is None:
            return Forgotten()
        revoked = 0
        if self.connections is not None:
            for connection in await self.connections.of(key, user_id):
                revoked += await self.connections.disconnect(key, user_id, connection.server)
        found = await self._people.forget_person(self.person(key, user_id), locks=self._locks)
        return replace(found, sign_ins=found.sign_ins + revoked)

    async def export_person(self, key: ConversationKey, user_id: str) -> dict[str, Any]:
        """Everything stored about this person, as one JSON-able document (no sign-in's tokens)."""
        if self._people is None:
            return {}
        return await self._people.export_person(self.person(key, user_id))

    # Schedules: prompts a person asked to run later. The model's tools make them; what follows is
    # what the front ends need to list and manage them and to run their due slots.

    async def schedules_of(self, owner: str) -> list[Schedule]:
        """A person's schedules still in effect (active or paused), oldest first."""
        return await self._schedules.schedules_of(owner) if self._schedules is not None else []

    async def all_schedules(self) -> list[Schedule]:
        """Everyone's schedules still in effect: the operator's view."""
        return await self._schedules.all_schedules() if self._schedules is not None else []

    async def schedule(self, schedule_id: str) -> Schedule | None:
        return await self._schedules.schedule(schedule_id.strip()) if self._schedules is not None else None

    async def schedule_runs(self, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs and missed slots, newest first: what a list shows as its last run."""
        return await self._schedules.runs_of(schedule_id, limit) if self._schedules is not None else []

    async def cancel_schedule(self, schedule_id: str, by: Person) -> ScheduleChange:
        """Stop a schedule for good: its person may, and an admin may (as with a place's memories),
        since a schedule posting in a shared place is the place's concern too. A run in flight
        finishes; no later slot is claimed (a claim needs an active schedule)."""
        return await self._change_schedule(schedule_id, by, "cancelled", ("active", "paused"), admin_may=True)

    async def pause_schedule(self, schedule_id: str, by: Person) -> ScheduleChange:
        """Let an active schedule's slots pass unrun until it is resumed; its person's alone."""
        return await self._change_schedule(schedule_id, by, "paused", ("active",), admin_may=False)

    async def resume_schedule(self, schedule_id: str, by: Person) -> ScheduleChange:
        """Run a paused schedule's slots again from now on (those that passed meanwhile stay unrun)."""
        changed = await self._change_schedule(schedule_id, by, "active", ("paused",), admin_may=False)
        if changed == "changed":
            self.wake_schedules()
        return changed

    async def _change_schedule(
        self,
        schedule_id: str,
        by: Person,
        status: Literal["active", "paused", "cancelled"],
        from_statuses: tuple[str, ...],
        *,
        admin_may: bool,
    ) -> ScheduleChange:
        schedule = await self.schedule(schedule_id)
        if self._schedules is None or schedule is None or schedule.status not in from_statuses:
            return "gone"
        admin = admin_may and by.user_id in self._config.admins
        if schedule.owner != by.id and not admin:
            return "not_yours"
        changed = await self._schedules.set_schedule_status(schedule.id, status, by=by.id)
        return "changed" if changed else "gone"

    @property
    def schedules_on(self) -> bool:
        """Whether schedules are kept here (a store holds them): a front end runs them only then."""
        return self._schedules is not None

    def schedule_runner(
        self,
        start: Start,
        *,
        mine: Callable[[Schedule], bool],
        grace: float | None = None,
        clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep,
        cadence: float = CADENCE,
        jobs: SlotJobs | None = None,
    ) -> ScheduleRunner:
        """A runner of the schedules `mine` accepts, whose due slots `start` runs (the front end's
        part: typically `run_scheduled`, then showing the answer). Its runs are held under the
        store's turn lock, so runners in other processes on the store tell them from abandoned ones.
        With `jobs` (PostgreSQL: `adapters.jobs_runtime.slot_jobs`) each due slot is queued as a job
        that any process's worker runs through the runner's `run_slot`. The grace is the configured
        one (NERVE_SCHEDULE_GRACE) unless given; a test passes its own `clock` and `sleep`."""
        if self._schedules is None:
            raise RuntimeError("this nerve has no store for schedules")
        runner = ScheduleRunner(
            self._schedules,
            start,
            locks=self._locks,
            clock=clock,
            sleep=sleep,
            grace=self._config.schedule_grace if grace is None else grace,
            cadence=cadence,
            mine=mine,
            jobs=jobs,
        )
        self._runners.add(runner)
        return runner

    def wake_schedules(self) -> None:
        """A schedule was added or resumed: the runners look at once, so a near slot is not late."""
        for runner in self._runners:
            runner.wake.set()

    async def run_scheduled(
        self,
        schedule: Schedule,
        slot: float,
        progress: Progress = no_progress,
        *,
        key: ConversationKey | None = None,
        place: Place | None = None,
        time_zone: str | None = None,
    ) -> AgentReply:
        """One due slot's turn, as the schedule's person: their message is the prompt, so their
        scopes, memories and approvals apply as if they had written it then. It answers in `key`
        (a channel run's own thread under the message it posted), by default where the schedule was
        made. The delivery id is the slot's, so a turn started again for one slot (handed on after
        its process stopped) goes on in the same message rather than storing a second."""
        incoming = scheduled_incoming(schedule, slot, key=key, place=place, time_zone=time_zone)
        return await self.reply(incoming, progress)

    async def schedule_run(self, schedule_id: str, slot: float) -> ScheduleRun | None:
        """One slot's run: a front end reads the message it kept with it (`keep_run_message`)."""
        return await self._schedules.run(schedule_id, slot) if self._schedules is not None else None

    async def keep_run_message(self, schedule_id: str, slot: float, message: str) -> bool:
        """Keep the platform message a run posted to answer under, as soon as it is posted: a run
        handed on after its process stopped then answers under it instead of posting again."""
        if self._schedules is None:
            return False
        return await self._schedules.set_run_message(schedule_id, slot, message)


def scheduled_incoming(
    schedule: Schedule,
    slot: float,
    *,
    key: ConversationKey | None = None,
    place: Place | None = None,
    time_zone: str | None = None,
) -> Incoming:
    """The message one due slot's turn starts with (`Agent.run_scheduled`): the schedule's prompt as
    its person's, with the slot's delivery id; `place` where the front end knows it better than the
    key says (a DM), `time_zone` the zone the person's platform reports."""
    return Incoming(
        key=key or schedule.key,
        text=schedule.prompt,
        user_id=schedule.owner_user,
        event_id=f"schedule:{schedule.id}:{slot:.0f}",
        place=place,
        scheduled=schedule.id,
        replayed=True,
        time_zone=time_zone,
    )
