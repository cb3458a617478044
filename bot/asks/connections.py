"""People's own accounts at per-person MCP servers, as front ends offer them.

Front ends never see tokens: a person gets a sign-in link theirs alone; finishing it names the parked
turns it lets go on, which the front end (or its sweep, anywhere) resumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.mcp.auth.people import person_of
from bot.types import ConversationKey, Platforms, SignInNeeded

if TYPE_CHECKING:  # the agent holds one; only a nerve with per-person servers loads the OAuth client
    from bot.mcp.auth.sign_ins import Connection, SignIns


class ForgetsSignIns(Protocol):
    async def forget_sign_in(self, server: str, person: str) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectStart:
    """`connect` asked: a link to open (only this person may see it), or why there is none."""

    sign_in: SignInNeeded | None = None
    note: str = ""


class Connections:
    """Sign-in, listing and disconnecting for the people of one nerve."""

    def __init__(self, sign_ins: SignIns, host: ForgetsSignIns, platforms: Platforms) -> None:
        self.sign_ins = sign_ins
        self._host = host
        self._platforms = platforms

    @property
    def servers(self) -> list[str]:
        """The servers each person connects with their own account."""
        return self.sign_ins.per_person_servers()

    async def connect(self, key: ConversationKey, user_id: str, server: str) -> ConnectStart:
        if server not in self.servers:
            known = ", ".join(self.servers) or "none"
            return ConnectStart(note=f"{server!r} is not a server you sign in to (those here: {known}).")
        person = person_of(key, user_id, self._platforms)
        if await self.sign_ins.has_tokens(server, person):
            return ConnectStart(note=f"You are already connected to {server}.")
        return ConnectStart(sign_in=await self.sign_ins.begin(server, person, key))

    async def of(self, key: ConversationKey, user_id: str) -> list[Connection]:
        return await self.sign_ins.connections(person_of(key, user_id, self._platforms))

    async def disconnect(self, key: ConversationKey, user_id: str, server: str) -> bool:
        """Revoke and forget this person's connection; their next call asks them to sign in again."""
        person = person_of(key, user_id, self._platforms)
        gone = await self.sign_ins.disconnect(server, person)
        await self._host.forget_sign_in(server, person)
        return gone
