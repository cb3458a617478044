"""The terminal as the core knows it (`bot.types.Platform`)."""

from __future__ import annotations

from bot.types import Platform

TERMINAL = Platform(
    name="terminal",
    title="the terminal",
    # One local person per login name, and no channels or DMs: a policy names `terminal` or
    # `terminal:user:<name>`.
    channels=False,
    fresh_start="start a new conversation with `/reset`",
)
