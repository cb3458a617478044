"""A new message's turn: admitted, stored, run, and parked when it waits for a person.

It sits beside the parking (`bot.asks.parking`) because a turn's start and its going on after an ask
keep the same rules: one turn per conversation at a time, a slot of the gate only for a turn that can
run, and a message that comes while its thread's turn is parked waiting behind it (`bot.asks.deferral`).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from bot.asks.deferral import Deferral
from bot.asks.parking import Parking
from bot.errors import LLMError, TurnOverdue
from bot.files.desk import FileDesk
from bot.files.intake import file_ids, with_listing
from bot.observe import metrics
from bot.observe.log_context import turn_context
from bot.observe.tracing import turn_span
from bot.seams import Store, TurnLock
from bot.text.scrubbing import question_too_long, scrub
from bot.turn.calls import TurnState
from bot.turn.deadline import TurnDeadline
from bot.turn.gate import BUSY_REPLY, GateFull, TurnGate, queued_notice
from bot.turn.loop import AgentConfig, TurnLoop
from bot.types import AgentReply, ChatMessage, ConversationKey, Incoming, Progress, TurnEvent, Usage

logger = logging.getLogger(__name__)


class Turns:
    """Runs the turns of new messages; the façade's `reply` hands every message here."""

    def __init__(
        self,
        loop: TurnLoop,
        store: Store,
        config: AgentConfig,
        locks: TurnLock,
        gate: TurnGate,
        parking: Parking,
        deferral: Deferral,
        files: FileDesk | None,
    ) -> None:
        self._loop = loop
        self._store = store
        self._config = config
        self._locks = locks
        self._gate = gate
        self._parking = parking
        self.deferral = deferral
        self._files = files

    async def reply(self, incoming: Incoming, progress: Progress) -> AgentReply:
        """Answer one message. Model and tool failures become a plain answer, never an exception."""
        # Every front end scrubs at its own edge; this one holds for all of them, present and future.
        incoming = replace(incoming, text=scrub(incoming.text), user_id=scrub(incoming.user_id))
        size, limit = len(incoming.text), self._config.max_question_chars
        if size > limit:
            metrics.turn_outcome("refused_too_long")
            async with self._locks.hold(incoming.key):
                notice = question_too_long(size, limit)
                return await self.deferral.instead(incoming, notice, store_notice=True)

        async def tell_place(position: int) -> None:
            await progress(TurnEvent(kind="notice", message=queued_notice(position)))

        # The conversation first, then a slot: turns queued behind another turn of their own thread
        # take no slot, so one busy thread cannot crowd out every other conversation.
        with turn_context(incoming.key), turn_span():
            async with self._locks.hold(incoming.key):
                try:
                    async with self._gate.admit(on_queued=tell_place, patient=incoming.replayed):
                        return await self._run(incoming, progress)
                except GateFull:
                    logger.warning("too many turns at once; told %s to try again", incoming.key)
                    metrics.turn_outcome("refused_busy")
                    return await self.deferral.instead(incoming, BUSY_REPLY, store_notice=False)

    async def message_kept(self, key: ConversationKey, event_id: str) -> bool:
        """Whether the person's message of `event_id` is stored in its thread: a turn stopped before
        it began (waiting for a slot) stored nothing, and its message is not answered later."""
        return await self._store.holds_event(key, event_id)

    async def _run(self, incoming: Incoming, progress: Progress) -> AgentReply:
        """One turn; the caller holds the conversation and a slot."""
        if await self.deferral.parked(incoming.key):
            # A replay of the message the parked turn waits on gets its request again; others wait behind it.
            return await self._parking.parked_by(incoming) or await self.deferral.defer(incoming)
        # The message is stored first, each shared file named in it, before any file is fetched.
        ids = file_ids(incoming)
        message = ChatMessage(role="user", content=with_listing(incoming, ids), files=ids)
        if stored := await self.deferral.stored_again(incoming, [message]):
            return stored
        state = TurnState()
        if self._files is not None and ids:
            intake = await self._files.take_in(incoming, ids, self.deferral.author(incoming).person, progress)
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
