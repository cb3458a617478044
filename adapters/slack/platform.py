"""Slack as the core knows it (`bot.types.Platform`)."""

from __future__ import annotations

from bot.types import Platform

SLACK = Platform(
    name="slack",
    title="Slack",
    # A user id is unique within its workspace only: sign-ins are kept per workspace.
    global_user_ids=False,
    # Installed in many workspaces ("Add to Slack"): the servers file's policy may name one.
    teams=True,
    fresh_start="start a new conversation with `/nerve reset`",
    # Slash commands do not know their thread: a channel thread is reset by a mention.
    fresh_start_in_thread="start a new conversation by mentioning me in this thread with the word `reset`",
)
