"""Naming a place for what is remembered about it."""

from __future__ import annotations

from bot.policy.scopes import Place


def place_id(place: Place) -> str:
    """The place an "always allow here" is remembered for: one channel or DM of one platform, or
    the terminal as a whole. Written as `Place.parse` reads it, so what `nerve approvals` lists is
    what `nerve tools --place` and `nerve approvals revoke` take."""
    if place.platform == "terminal":
        return "terminal"
    return f"{place.platform}:{place.channel or '-'}"
