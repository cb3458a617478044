"""A person as nerve keeps their data: who wrote a message, whose data is exported or forgotten.

One rule names a person everywhere (sign-ins, memories, message authors): `PLATFORM:WORKSPACE:USER`,
or `PLATFORM:USER` on a platform whose user ids are global (`Platform.global_user_ids`), because
there the same id is the same person in every workspace.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.policy.platforms import Platforms
from bot.types.conversation import ConversationKey


@dataclass(frozen=True, slots=True, kw_only=True)
class Person:
    """`id` as sign-ins and memories key the person; `platform`, `workspace` and `user_id` as the
    tables that name people by their platform's id (parked turns, the audit, feedback) do."""

    id: str
    platform: str
    user_id: str
    # None where the platform's user ids are global: the person's rows in every workspace.
    workspace: str | None

    @classmethod
    def of(cls, key: ConversationKey, user_id: str, platforms: Platforms) -> Person:
        """The person who wrote `user_id`'s messages in `key`'s workspace (what a front end holds)."""
        platform = platforms.get(key.platform)
        if platform is not None and platform.global_user_ids:
            return cls(id=f"{key.platform}:{user_id}", platform=key.platform, user_id=user_id, workspace=None)
        return cls(
            id=f"{key.platform}:{key.workspace}:{user_id}",
            platform=key.platform,
            user_id=user_id,
            workspace=key.workspace,
        )

    @classmethod
    def named(cls, text: str, platforms: Platforms) -> Person:
        """A person as an operator writes their id, `PLATFORM:WORKSPACE_ID:USER_ID`, or `PLATFORM:USER_ID`
        where user ids are global; ValueError saying what to write."""
        name, _, rest = text.strip().partition(":")
        platform = platforms.get(name)
        if platform is None:
            names = ", ".join(p.name for p in platforms.known) or "none here"
            raise ValueError(f"{text.strip()!r} names no known platform: it must start with one of {names}")
        parts = rest.split(":") if rest else []
        form = f"{name}:USER_ID" if platform.global_user_ids else f"{name}:WORKSPACE_ID:USER_ID"
        if len(parts) != (1 if platform.global_user_ids else 2) or not all(p.strip() for p in parts):
            raise ValueError(f"write a person on {platform.title} as {form}, not {text.strip()!r}")
        workspace = "" if platform.global_user_ids else parts[0].strip()
        key = ConversationKey(platform=name, workspace=workspace, channel="", thread="")
        return cls.of(key, parts[-1].strip(), platforms)


@dataclass(frozen=True, slots=True, kw_only=True)
class Author:
    """Who wrote a user message, recorded with it, and whether its conversation is private (a DM, or
    a platform without channels such as the terminal): read by that person alone."""

    person: str
    user_id: str
    private: bool
