"""A person as the front ends name them: their own accounts at per-person servers, and their data rights.

The two are one concern because forgetting a person must revoke their sign-ins at the servers before
their rows go, or a server would keep honouring tokens nerve no longer knows of. Front ends name the
person as they have them: where they wrote (the key's platform and workspace) and their platform's
user id; the person is the same in every workspace where the platform's user ids are global.
`nerve forget` and `nerve export` name them by id instead (`Person.named`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bot.asks.answering import NO_SIGN_INS
from bot.asks.connections import Connections, ConnectStart
from bot.policy.platforms import Platforms
from bot.seams import TurnLock
from bot.store.person_data import Forgotten, PersonLedger
from bot.types import ConversationKey, Person

if TYPE_CHECKING:  # only a nerve with per-person servers loads the OAuth client
    from bot.mcp.auth.sign_ins import Connection


class PeopleDesk:
    """People's accounts (none without `connections`) and what is stored about them (`people`)."""

    def __init__(
        self,
        connections: Connections | None,
        people: PersonLedger | None,
        *,
        platforms: Platforms,
        locks: TurnLock,
    ) -> None:
        self._connections = connections
        self._people = people
        self._platforms = platforms
        self._locks = locks

    def person(self, key: ConversationKey, user_id: str) -> Person:
        return Person.of(key, user_id, self._platforms)

    def sign_in_servers(self) -> list[str]:
        return self._connections.servers if self._connections is not None else []

    async def connect(self, key: ConversationKey, user_id: str, server: str) -> ConnectStart:
        """Start `user_id`'s sign-in to `server`: a link only they may see, or why there is none."""
        if self._connections is None:
            return ConnectStart(note=NO_SIGN_INS)
        return await self._connections.connect(key, user_id, server)

    async def disconnect(self, key: ConversationKey, user_id: str, server: str) -> bool:
        """Revoke and forget `user_id`'s connection to `server`; False when there was none."""
        return await self._connections.disconnect(key, user_id, server) if self._connections else False

    async def connected(self, key: ConversationKey, user_id: str) -> list[Connection]:
        """The servers `user_id` has connected with their own account, and since when."""
        return await self._connections.of(key, user_id) if self._connections is not None else []

    async def forget(self, key: ConversationKey, user_id: str) -> Forgotten:
        """Delete everything stored about this person (see `bot.store.person_data`), their sign-ins
        revoked at the servers first; the counts say what went. Nothing stored gives zeros. It waits
        for the turns running in the threads they wrote in: call it outside any turn."""
        if self._people is None:
            return Forgotten()
        revoked = 0
        if self._connections is not None:
            for connection in await self._connections.of(key, user_id):
                revoked += await self._connections.disconnect(key, user_id, connection.server)
        found = await self._people.forget_person(self.person(key, user_id), locks=self._locks)
        return replace(found, sign_ins=found.sign_ins + revoked)

    async def export(self, key: ConversationKey, user_id: str) -> dict[str, Any]:
        """Everything stored about this person, as one JSON-able document (no sign-in's tokens)."""
        if self._people is None:
            return {}
        return await self._people.export_person(self.person(key, user_id))
