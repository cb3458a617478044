"""Who a person is to a server they sign in to, across the conversations they write in.

A Slack user id is unique within its workspace; a Discord user id is global, so a Discord person
keeps one sign-in across servers (guilds) and DMs. The terminal is one local person per name.
"""

from __future__ import annotations

from bot.types import ConversationKey

_GLOBAL_IDS = frozenset({"discord"})


def person_of(key: ConversationKey, user_id: str) -> str:
    """The stable id sign-ins are stored under: `slack:T123:U456`, `discord:42`, `terminal:local:me`."""
    if key.platform in _GLOBAL_IDS:
        return f"{key.platform}:{user_id}"
    return f"{key.platform}:{key.workspace}:{user_id}"
