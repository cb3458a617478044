"""Whose memories a turn may see and write, from where it happens and who asks.

A place's memories belong to the channel, or to the whole guild where a platform has guilds; a DM and
the terminal are private: only their person reads the answers there, so all their memories may be used.
"""

from __future__ import annotations

from bot.mcp.auth.people import person_of
from bot.policy.platforms import Platforms
from bot.policy.scopes import Place, place_id
from bot.store.memories import MemoryScope
from bot.types import Incoming


def memory_place(place: Place) -> str:
    """The place a place memory is kept for: the server of a guild's channel, else the channel."""
    if place.guild and not place.dm:
        return f"{place.platform}:guild:{place.guild}"
    return place_id(place)


def is_private(place: Place, platforms: Platforms) -> bool:
    """Only the person reads the answers here: a DM, or a platform without channels (the terminal)."""
    platform = platforms.get(place.platform)
    return place.dm or (platform is not None and not platform.channels)


def turn_scope(incoming: Incoming, platforms: Platforms) -> MemoryScope:
    place = incoming.where()
    return MemoryScope(
        person=person_of(incoming.key, incoming.user_id, platforms),
        place=memory_place(place),
        private=is_private(place, platforms),
    )
