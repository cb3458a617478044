"""The prompts the servers offer, as people may start them in a place.

A prompt starts a turn with a server's text, so a place's scopes judge it as they judge a tool of the
same name: one a place may not call, it may not start either. Kept apart from the host, which offers
every prompt of every server, so that rule holds for every front end that lists or starts one.
"""

from __future__ import annotations

from bot.errors import PromptError
from bot.policy.scopes import Scopes
from bot.seams import PromptHost, ToolHost
from bot.types import Incoming, PromptSpec


class Prompts:
    """The prompts of `host` under `scopes`; none at all for a host that offers none (test hosts)."""

    def __init__(self, host: ToolHost, scopes: Scopes) -> None:
        self._host = host
        self._scopes = scopes

    def offered(self, incoming: Incoming | None = None) -> list[PromptSpec]:
        """Every prompt, or those the place where `incoming` was written may start."""
        if not isinstance(self._host, PromptHost):
            return []
        prompts = self._host.list_prompts()
        return prompts if incoming is None else self._scopes.offered(incoming.where(), prompts)

    async def question(self, incoming: Incoming, name: str, arguments: dict[str, str]) -> str:
        """The text a prompt starts the turn with; `PromptError` when it cannot be started here."""
        offered = {p.name: p for p in self.offered(incoming)}
        if name not in offered or not isinstance(self._host, PromptHost):
            known = ", ".join(sorted(offered)) or "none here"
            raise PromptError(f"There is no prompt named {name!r} here. Prompts: {known}.")
        return await self._host.get_prompt(name, arguments)

    async def complete_argument(
        self, name: str, argument: str, value: str, known: dict[str, str] | None = None
    ) -> list[str]:
        if not isinstance(self._host, PromptHost):
            return []
        return await self._host.complete_prompt_argument(name, argument, value, known)
