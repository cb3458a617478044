"""The Discord front end's settings: its token, guild, API addresses, intents, rate limits and shards.

Shards (`NERVE_DISCORD_SHARDS`) are written as ranges and lists (`0-3`, `0,2,5`), and each mistake
is named: a shard run twice would receive every event twice.
"""

from __future__ import annotations

import re

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from bot.config import SETTINGS_SOURCES, Settings


class DiscordSettings(Settings):
    """What `nerve discord` reads: the core's settings and Discord's own."""

    model_config = SETTINGS_SOURCES

    discord_bot_token: SecretStr | None = None
    discord_guild_id: int | None = None
    discord_api_base_url: str = "https://discord.com/api/v10"
    discord_gateway_url: str | None = None
    nerve_discord_message_content: bool = False
    nerve_discord_max_ratelimit_timeout: float = Field(default=60.0, gt=0)
    # Sharding, for bots in more guilds than one gateway connection may serve: the total number of
    # shards, and which of them this process runs (`0-3`, `0,2,5`; all of them when unset).
    nerve_discord_shard_count: int | None = Field(default=None, ge=1)
    nerve_discord_shards: str | None = None

    @field_validator("nerve_discord_shards")
    @classmethod
    def _shards_within_count(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or "nerve_discord_shard_count" not in info.data:
            return value  # unset, or the count is wrong and already reported
        count = info.data["nerve_discord_shard_count"]
        if count is None:
            raise ValueError("set NERVE_DISCORD_SHARD_COUNT too: shard ids mean nothing without the count")
        parse_shard_ids(value, count)
        return value

    @property
    def discord_shard_ids(self) -> list[int] | None:
        count = self.nerve_discord_shard_count
        if count is None:
            return None
        shards = self.nerve_discord_shards
        return parse_shard_ids(shards, count) if shards else list(range(count))


_PART = re.compile(r"(\d+)(?:\s*-\s*(\d+))?")


def parse_shard_ids(text: str, count: int) -> list[int]:
    ids: list[int] = []
    seen: set[int] = set()
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            raise ValueError(f"{text!r} has an empty entry; write ids like 0-3 or 0,2,5")
        match = _PART.fullmatch(part)
        if match is None:
            raise ValueError(f"{part!r} is not a shard id or a range like 0-3")
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first:
            raise ValueError(f"{part!r} runs backwards; write the lower id first")
        for shard in range(first, last + 1):
            if shard >= count:
                raise ValueError(
                    f"shard {shard} does not exist with NERVE_DISCORD_SHARD_COUNT={count}"
                    f" (ids run from 0 to {count - 1})"
                )
            if shard in seen:
                raise ValueError(f"shard {shard} is named twice; each shard runs in one place")
            seen.add(shard)
            ids.append(shard)
    return ids
