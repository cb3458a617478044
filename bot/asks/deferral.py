"""A message that is not answered now is still stored: none is lost.

Three messages are not answered when they come: one over the size limit, one the turn gate turns away
(too many turns at once), and one that comes while its thread's turn is parked on an ask. The first two
are stored with the notice their writer gets; the last waits behind the parked turn, since inside that
turn's round nothing may be written, and is answered in order once the turn goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from bot.asks.answering import Answering
from bot.files.intake import file_ids, with_listing
from bot.memory.scope import is_private
from bot.policy.platforms import Platforms
from bot.seams import Store
from bot.store.approvals import ApprovalLedger
from bot.turn.loop import TurnLoop
from bot.types import AgentReply, Author, ChatMessage, ConversationKey, Incoming, Person, Progress

DEFERRED_REPLY = (
    "I'm still waiting for a decision on the tool calls I asked to run for your earlier message; "
    "I'll answer this message right after that."
)
DEFERRED_FOR_ANSWER = (
    "A tool is still waiting for an answer to its question about your earlier message; "
    "I'll answer this message right after that."
)

FILES_NOT_KEPT = "The files you shared with it are not kept while it waits: share them again then."

# How the messages that waited are answered: the façade's own `reply`, as a front end calls it.
Reply = Callable[[Incoming, Progress], Awaitable[AgentReply]]


class Deferral:
    """Stores the messages of `store` that get no turn now; without approvals none waits (none parks)."""

    def __init__(
        self,
        store: Store,
        loop: TurnLoop,
        approvals: ApprovalLedger | None,
        asks: Answering,
        platforms: Platforms,
    ) -> None:
        self._store = store
        self._loop = loop
        self._approvals = approvals
        self._asks = asks
        self._platforms = platforms

    async def parked(self, key: ConversationKey) -> bool:
        """Whether the thread's turn is parked: a message that comes now waits behind it."""
        return self._approvals is not None and await self._approvals.waiting_in(key) is not None

    async def instead(self, incoming: Incoming, notice: str, *, store_notice: bool) -> AgentReply:
        """Store the message (none is lost) and answer `notice`, unstored when busy so a retry is answered."""
        if await self.parked(incoming.key):
            # Inside a parked turn's round nothing may be written: the message waits behind it.
            return await self.defer(incoming)
        # Stored as a turn stores it, each shared file named with its id, so none is lost.
        ids = file_ids(incoming)
        messages = [ChatMessage(role="user", content=with_listing(incoming, ids), files=ids)]
        if store_notice:
            messages.append(ChatMessage(role="assistant", content=notice))
        return await self.stored_again(incoming, messages) or AgentReply(text=notice, failed=True)

    async def defer(self, incoming: Incoming) -> AgentReply:
        """Keep a message behind the thread's parked turn, telling its writer what that turn waits for."""
        assert self._approvals is not None
        await self._approvals.defer(incoming)
        found = await self._asks.parked_in(incoming.key)
        text = DEFERRED_FOR_ANSWER if found is not None and not found[0].calls else DEFERRED_REPLY
        if incoming.files:  # a waiting message keeps its text only: a platform's fetch is not stored
            text += f" {FILES_NOT_KEPT}"
        return AgentReply(text=text, deferred=True)

    async def stored_again(self, incoming: Incoming, messages: list[ChatMessage]) -> AgentReply | None:
        """Store the message; for one delivered again whose answer is stored already, that answer."""
        author = self.author(incoming)
        if await self._store.append(incoming.key, messages, event_id=incoming.event_id, author=author):
            return None
        return await self._loop.stored_answer(incoming)

    def author(self, incoming: Incoming) -> Author:
        """Who wrote a message, and whether where it was written is theirs alone (a DM, or a platform
        without channels such as the terminal), kept with it for the person's data rights."""
        person = Person.of(incoming.key, incoming.user_id, self._platforms)
        private = is_private(incoming.where(), self._platforms)
        return Author(person=person.id, user_id=incoming.user_id, private=private)

    async def replies(
        self, key: ConversationKey, progress: Progress, reply: Reply
    ) -> AsyncIterator[tuple[Incoming, AgentReply]]:
        """Answer, in order, the messages that waited behind a parked turn; stop after one that parks."""
        if self._approvals is None:
            return
        while (item := await self._approvals.next_deferred(key)) is not None:
            deferred_id, incoming = item
            if await self._approvals.waiting_in(key) is not None:
                return
            answered = await reply(incoming, progress)
            await self._approvals.drop_deferred(deferred_id)
            yield incoming, answered
            if answered.waiting:
                return
