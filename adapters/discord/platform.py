"""Discord as the core knows it (`bot.types.Platform`)."""

from __future__ import annotations

from bot.types import Platform

DISCORD = Platform(
    name="discord",
    title="Discord",
    # Channels are grouped in guilds, which a policy may name (`discord:guild:<id>`).
    guilds=True,
    # A user id is global, so a person keeps one sign-in across guilds and DMs.
    global_user_ids=True,
    fresh_start="start a new conversation with `/reset`",
)
