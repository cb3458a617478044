"""Who a person is to a server they sign in to: one sign-in per workspace user, or per user where the
platform's ids are global (`Platform.global_user_ids`)."""

from __future__ import annotations

from bot.types import ConversationKey, Person, Platforms


def person_of(key: ConversationKey, user_id: str, platforms: Platforms) -> str:
    """The stable id sign-ins are stored under (`Person.of`'s, which memories and messages use too)."""
    return Person.of(key, user_id, platforms).id
