"""Who a person is to a server they sign in to: one sign-in per workspace user, or per user where the
platform's ids are global (`Platform.global_user_ids`)."""

from __future__ import annotations

from bot.types import ConversationKey, Platforms


def person_of(key: ConversationKey, user_id: str, platforms: Platforms) -> str:
    """The stable id sign-ins are stored under."""
    platform = platforms.get(key.platform)
    if platform is not None and platform.global_user_ids:
        return f"{key.platform}:{user_id}"
    return f"{key.platform}:{key.workspace}:{user_id}"
