"""What the core needs to know of each chat platform, told by the front ends.

The core names no platform: the front ends hand it their table (`Platforms`), which the grammar of
places, the id sign-ins are kept under and the advice on starting afresh follow.
"""

from __future__ import annotations

from dataclasses import dataclass

# How a person starts afresh where their platform says nothing more.
FRESH_START = "start a new conversation"


@dataclass(frozen=True, slots=True, kw_only=True)
class Platform:
    """One chat surface, as its front end describes it to the core."""

    # As conversation keys, places and policy files write it.
    name: str
    # As a sentence names it ("the … has no channels").
    title: str
    # Its channels are grouped (a place may name the group: `<name>:guild:<id>`).
    guilds: bool = False
    # It is installed in many workspaces (teams): a place may name one, `<name>:team:<id>`.
    teams: bool = False
    # It has channels and DMs; without them a place names the platform, or a user on it.
    channels: bool = True
    # A user id names one person across the whole platform, not within one workspace: their
    # sign-ins follow them into every workspace and DM.
    global_user_ids: bool = False
    # How a person starts a new conversation there (the command); in a channel thread, where that
    # differs.
    fresh_start: str = FRESH_START
    fresh_start_in_thread: str | None = None


@dataclass(frozen=True, slots=True)
class Platforms:
    """The platforms a nerve speaks on, in the order messages list them; none for the core alone."""

    known: tuple[Platform, ...] = ()

    def get(self, name: str) -> Platform | None:
        return next((platform for platform in self.known if platform.name == name), None)
