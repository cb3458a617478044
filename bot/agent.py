"""The agent, the core's façade: one turn of conversation, from the user's message to the answer (S4–S12).

It assembles the core and hands each call to the part whose concern it is: a message's turn to
`bot.asks.turns`, an answer to any ask to `bot.asks.answering`, schedules to `bot.schedules.desk`, and
so on. The rules live with those parts; the façade keeps the names the front ends use, platform-free.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from bot.asks import inputs as _inputs
from bot.asks import parking as _parking
from bot.asks.answering import Answering
from bot.asks.connections import Connections as Connections
from bot.asks.connections import ConnectStart
from bot.asks.deferral import Deferral
from bot.asks.inputs import Clock, InputDesk
from bot.asks.parking import Parking
from bot.asks.people import PeopleDesk
from bot.asks.turns import Turns
from bot.budgets.meter import usage_meter
from bot.files.desk import file_desk
from bot.files.tools import FILES_SERVER
from bot.installs import Install as Install
from bot.installs import WorkspaceInstalls as WorkspaceInstalls
from bot.mcp.prompts import Prompts
from bot.memory.manage import MemoryManager
from bot.memory.tools import MEMORY_SERVER
from bot.model.concurrency import ConcurrencyLimits
from bot.observe import metrics
from bot.schedules import timing as _timing
from bot.schedules.desk import ScheduleDesk
from bot.schedules.desk import scheduled_incoming as scheduled_incoming
from bot.schedules.runner import CADENCE
from bot.schedules.runner import ScheduleRunner as ScheduleRunner
from bot.schedules.slots import RunOutcome as RunOutcome
from bot.schedules.slots import SlotJobs as SlotJobs
from bot.schedules.slots import Start
from bot.schedules.slots import Tick as Tick
from bot.schedules.tools import SCHEDULES_SERVER
from bot.seams import LLM, ServerStates, Store, ToolHost, TurnLock
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
from bot.turn.calls import RoundRunner, Sleep
from bot.turn.failures import shown_to_people as shown_to_people
from bot.turn.gate import TurnGate
from bot.turn.loop import DEFAULT_SYSTEM_PROMPT as DEFAULT_SYSTEM_PROMPT
from bot.turn.loop import AgentConfig as AgentConfig
from bot.turn.loop import TurnLoop
from bot.types import (
    AgentReply,
    Answer,
    Answered,
    ApprovalPrompt,
    Ask,
    AuditEntry,
    ConversationKey,
    Incoming,
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
    StopBoard,
    UndoOutcome,
    UsageReport,
    no_progress,
)

if TYPE_CHECKING:  # only a nerve with per-person servers loads the OAuth client: front ends type with it
    from bot.mcp.auth.sign_ins import Connection as Connection

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
        # People's own accounts at per-person servers (sign-in); None when no server needs one.
        self.connections = connections
        self._host = host
        self._store = store
        self._config = made = config or AgentConfig()
        # The store's lock when processes share it (one turn per conversation across all of them);
        # in memory otherwise.
        self._locks: TurnLock = turn_lock or KeyedLocks()
        # Stop requests between the processes that share the turns (the store's own lock), so a stop
        # pressed in one reaches a turn running in another; None when turns are this process's alone.
        shared = isinstance(store, ConversationStore) and store.turn_lock is turn_lock
        self.stop_board: StopBoard | None = store if isinstance(store, ConversationStore) and shared else None
        # People's accounts, and what is stored about each person to export or forget (the store's
        # own ledger by default).
        self._people = PeopleDesk(
            connections,
            people if people is not None else store if isinstance(store, PersonLedger) else None,
            platforms=made.platforms,
            locks=self._locks,
        )
        # The model's limit on turns at once, learnt from its answers, when the model client reports
        # each request to `limits`; else the configured number, fixed.
        self.limits = limits
        limit = limits.of(made.model) if limits is not None else made.max_concurrent_turns
        self.gate = TurnGate(limit=limit, queue=made.turn_queue)
        # Where servers' questions mid-call are shown and answered; without it they get "cancel".
        self.inputs = (
            InputDesk(inputs, clock=clock, timeout=made.input_timeout) if inputs is not None else None
        )
        # The built-in memory tools, and the memories each turn is sent; none without a ledger. People
        # manage their memories between turns (a list's buttons, an Undo) by the tools' rules.
        self._memories = MemoryManager.over(
            memories, platforms=made.platforms, admins=made.admins, scopes=made.scopes
        )
        self.memory = self._memories.tools
        # People's schedules (their prompts run later) and their own time zones; the store's own
        # ledgers by default.
        own_settings = store if isinstance(store, PersonSettingsLedger) else None
        self._schedule_desk = ScheduleDesk(
            schedules if schedules is not None else store if isinstance(store, ScheduleLedger) else None,
            person_settings if person_settings is not None else own_settings,
            platforms=made.platforms,
            admins=made.admins,
            locks=self._locks,
            grace=made.schedule_grace,
        )
        # The built-in schedule tools: only where a person can be asked, since nothing is scheduled
        # without its person's confirmation.
        asked = schedules if approvals is not None else None
        self.schedule_tools = self._schedule_desk.tools(
            asked, clock=clock, per_person=made.schedules_per_person, runs_on=made.schedules_run_on
        )
        builtins: dict[str, ToolHost] = {}
        if self.memory is not None:
            builtins[MEMORY_SERVER] = self.memory
        if self.schedule_tools is not None:
            builtins[SCHEDULES_SERVER] = self.schedule_tools
        # People's shared files, read and kept with their conversation; only named without a store.
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
        # Every kind of ask answered one way.
        self._asks = Answering(self._parking, approvals, self.inputs, connections)
        # New messages' turns, and the messages that get none now, stored all the same.
        deferral = Deferral(store, self._loop, approvals, self._asks, made.platforms)
        self._turns = Turns(
            self._loop, store, made, self._locks, self.gate, self._parking, deferral, self.files
        )
        # Parked turns as the front ends drive them: deny what nobody can be asked about, find what
        # is due or was left at a stop, and go on with a turn once every call is decided.
        self.deny_unasked = self._parking.deny_unasked
        self.expire_due = self._parking.expire_due
        self.recover_parked = self._parking.recover_parked
        self.resume = self._parking.resume
        # The prompts the servers offer, as people may start them where they write.
        self._prompts = Prompts(host, self._config.scopes)
        # What the model is offered right now (in the place an incoming message was written, if given).
        self.tools = self._loop.tools

    async def time_zone_of(self, person: Person, hint: str | None = None) -> str:
        """The IANA zone `person`'s schedules are read and shown in (`ScheduleDesk.time_zone_of`)."""
        return await self._schedule_desk.time_zone_of(person, hint)

    async def set_time_zone(self, person: Person, name: str | None) -> str:
        """Set `person`'s zone (None or "": back to the default); the zone now in effect.
        `ScheduleError` (its message says what to write) when `name` is no IANA zone."""
        return await self._schedule_desk.set_time_zone(person, name)

    async def memories(self, incoming: Incoming) -> list[Memory]:
        """What a person may see and manage where `incoming` was written (`MemoryManager.memories`)."""
        return await self._memories.memories(incoming)

    async def forget_memory(self, incoming: Incoming, memory_id: str) -> Memory | None:
        """Forget one memory for the person of `incoming`; None when it is not theirs to forget."""
        return await self._memories.forget(incoming, memory_id)

    async def use_memory_anywhere(self, incoming: Incoming, memory_id: str, anywhere: bool) -> bool:
        """Let one of the person's own memories be used in shared places too (or no longer)."""
        return await self._memories.use_anywhere(incoming, memory_id, anywhere)

    async def undo_memory(self, incoming: Incoming, memory_id: str) -> UndoOutcome:
        """An Undo pressed under a reply: "forgotten", "gone" or "not_yours" (`MemoryManager.undo`)."""
        return await self._memories.undo(incoming, memory_id)

    async def forget_my_memories(self, incoming: Incoming) -> int:
        """Forget every personal memory of the person of `incoming`; how many there were."""
        return await self._memories.forget_all_of(incoming)

    async def usage(self, incoming: Incoming) -> UsageReport | None:
        """The person's use today and this month with their limits (an admin's report adds the place's
        and the workspace's); None where the store keeps no usage."""
        return None if (meter := self._loop.meter) is None else await meter.report(incoming)

    async def message_kept(self, key: ConversationKey, event_id: str) -> bool:
        """Whether the person's message of `event_id` is stored in its thread (`Turns.message_kept`)."""
        return await self._turns.message_kept(key, event_id)

    async def reset(self, key: ConversationKey) -> None:
        """Start a new conversation in this thread; the old one stays stored, its parked turn ends."""
        async with self._locks.hold(key):
            if self.approvals is not None:
                await self.approvals.close_parked(key)
            await self._store.reset(key)

    @metrics.turn
    async def reply(self, incoming: Incoming, progress: Progress = no_progress) -> AgentReply:
        """Answer one message. Model and tool failures become a plain answer, never an exception."""
        return await self._turns.reply(incoming, progress)

    def server_states(self) -> dict[str, bool]:
        return self._host.server_states() if isinstance(self._host, ServerStates) else {}

    def prompts(self, incoming: Incoming | None = None) -> list[PromptSpec]:
        """The prompts people may start here: scopes judge a prompt as a tool of the same name."""
        return self._prompts.offered(incoming)

    async def prompt_question(self, incoming: Incoming, name: str, arguments: dict[str, str]) -> str:
        """The text a prompt starts the turn with; `PromptError` when it cannot be started here."""
        return await self._prompts.question(incoming, name, arguments)

    async def complete_prompt_argument(
        self, name: str, argument: str, value: str, known: dict[str, str] | None = None
    ) -> list[str]:
        return await self._prompts.complete_argument(name, argument, value, known)

    async def open_input(self, request_id: str, user_id: str) -> InputOutcome:
        """A click on a server's question: the request when this person may answer it now, or why not."""
        return await self._asks.open_input(request_id, user_id)

    async def ask_posted(self, ask: Ask, ref: str) -> None:
        """Remember where an ask was shown, for whichever process redraws it (sign-ins are never redrawn)."""
        await self._asks.posted(ask, ref)

    async def parked_questions(self, request_id: str) -> list[InputRequest]:
        """The open questions a parked turn waits on, for a front end that stopped to ask again."""
        return await self._asks.parked_questions(request_id)

    async def deferred_replies(
        self, key: ConversationKey, progress: Progress = no_progress
    ) -> AsyncIterator[tuple[Incoming, AgentReply]]:
        """Answer, in order, the messages that waited behind a parked turn; stop after one that parks."""
        async for answered in self._turns.deferral.replies(key, progress, self.reply):
            yield answered

    async def answer(self, ask_id: str, person: str, answer: Answer) -> Answered:
        """Apply `answer` from `person` to the ask `ask_id`; `AskError` when it is gone or expired."""
        return await self._asks.answer(ask_id, person, answer)

    async def parked_in(self, key: ConversationKey) -> tuple[ApprovalPrompt, str] | None:
        """The turn this thread is parked on, with its status, for a front end without an ask in hand."""
        return await self._asks.parked_in(key)

    async def parked(self, request_id: str) -> tuple[ApprovalPrompt, str] | None:
        return await self._asks.parked(request_id)

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

    # People's own accounts at per-person servers, and their data rights (`bot.asks.people`).

    def sign_in_servers(self) -> list[str]:
        return self._people.sign_in_servers()

    async def connect(self, key: ConversationKey, user_id: str, server: str) -> ConnectStart:
        """Start `user_id`'s sign-in to `server`: a link only they may see, or why there is none."""
        return await self._people.connect(key, user_id, server)

    async def disconnect(self, key: ConversationKey, user_id: str, server: str) -> bool:
        """Revoke and forget `user_id`'s connection to `server`; False when there was none."""
        return await self._people.disconnect(key, user_id, server)

    async def connected(self, key: ConversationKey, user_id: str) -> list[Connection]:
        """The servers `user_id` has connected with their own account, and since when."""
        return await self._people.connected(key, user_id)

    def person(self, key: ConversationKey, user_id: str) -> Person:
        return self._people.person(key, user_id)

    async def forget_person(self, key: ConversationKey, user_id: str) -> Forgotten:
        """Delete everything stored about this person, their sign-ins revoked at the servers first
        (`PeopleDesk.forget`); call it outside any turn."""
        return await self._people.forget(key, user_id)

    async def export_person(self, key: ConversationKey, user_id: str) -> dict[str, Any]:
        """Everything stored about this person, as one JSON-able document (no sign-in's tokens)."""
        return await self._people.export(key, user_id)

    # Schedules: prompts a person asked to run later, as the front ends manage and run them.

    async def schedules_of(self, owner: str) -> list[Schedule]:
        """A person's schedules still in effect (active or paused), oldest first."""
        return await self._schedule_desk.schedules_of(owner)

    async def all_schedules(self) -> list[Schedule]:
        """Everyone's schedules still in effect: the operator's view."""
        return await self._schedule_desk.all_schedules()

    async def schedule(self, schedule_id: str) -> Schedule | None:
        return await self._schedule_desk.schedule(schedule_id)

    async def schedule_runs(self, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs and missed slots, newest first: what a list shows as its last run."""
        return await self._schedule_desk.runs_of(schedule_id, limit)

    async def cancel_schedule(self, schedule_id: str, by: Person) -> ScheduleChange:
        """Stop a schedule for good: its person may, and an admin may (`ScheduleDesk.cancel`)."""
        return await self._schedule_desk.cancel(schedule_id, by)

    async def pause_schedule(self, schedule_id: str, by: Person) -> ScheduleChange:
        """Let an active schedule's slots pass unrun until it is resumed; its person's alone."""
        return await self._schedule_desk.pause(schedule_id, by)

    async def resume_schedule(self, schedule_id: str, by: Person) -> ScheduleChange:
        """Run a paused schedule's slots again from now on (those that passed meanwhile stay unrun)."""
        return await self._schedule_desk.resume(schedule_id, by)

    @property
    def schedules_on(self) -> bool:
        """Whether schedules are kept here (a store holds them): a front end runs them only then."""
        return self._schedule_desk.ledger is not None

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
        part: typically `run_scheduled`, then showing the answer); see `ScheduleDesk.runner`."""
        return self._schedule_desk.runner(
            start, mine=mine, grace=grace, clock=clock, sleep=sleep, cadence=cadence, jobs=jobs
        )

    def wake_schedules(self) -> None:
        """A schedule was added or resumed: the runners look at once, so a near slot is not late."""
        self._schedule_desk.wake()

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
        scopes, memories and approvals apply as if they had written it then (`scheduled_incoming`)."""
        incoming = scheduled_incoming(schedule, slot, key=key, place=place, time_zone=time_zone)
        return await self.reply(incoming, progress)

    async def schedule_run(self, schedule_id: str, slot: float) -> ScheduleRun | None:
        """One slot's run: a front end reads the message it kept with it (`keep_run_message`)."""
        return await self._schedule_desk.run(schedule_id, slot)

    async def keep_run_message(self, schedule_id: str, slot: float, message: str) -> bool:
        """Keep the platform message a run posted to answer under (`ScheduleDesk.keep_run_message`)."""
        return await self._schedule_desk.keep_run_message(schedule_id, slot, message)
