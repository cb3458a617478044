"""Naming a place for what is remembered about it."""

from __future__ import annotations

from bot.policy.scopes import Place


def place_id(place: Place) -> str:
    """The place an "always allow here" is remembered for, written as `Place.parse` reads it."""
    if place.platform == "terminal":
        return "terminal"
    return f"{place.platform}:{place.channel or '-'}"
