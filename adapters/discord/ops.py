"""What the operations endpoints read from discord.py: whether the gateway is up, and its rate-limit
waits (counted for `/metrics`)."""

from __future__ import annotations

import logging

import discord

from bot.observe import metrics

# discord.py announces each 429 it waits out with this record, and offers no other hook for it.
WAIT_RECORD = "We are being rate limited. %s %s responded with 429. Retrying in %.2f seconds."


def gateway_up(client: discord.Client) -> bool:
    """Connected: past READY, and the gateway socket open (a reconnect leaves `is_ready()` set);
    sharded, every shard's socket (`client.ws` means nothing there)."""
    if not client.is_ready() or client.is_closed():
        return False
    if isinstance(client, discord.AutoShardedClient):
        shards = client.shards.values()
        return bool(shards) and not any(shard.is_closed() for shard in shards)
    ws = client.ws
    return ws is not None and ws.open


class _RateLimitWaits(logging.Filter):
    """Counts the waits from discord.py's own record; the record is shown as NERVE_LOG_LEVEL says."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == WAIT_RECORD and isinstance(record.args, tuple) and len(record.args) == 3:
            seconds = record.args[2]
            metrics.rate_limit_wait("discord", float(seconds) if isinstance(seconds, int | float) else 0.0)
        return record.levelno >= logging.getLogger().getEffectiveLevel()


def count_rate_limit_waits() -> None:
    """Count discord.py's rate-limit waits from now on (once per process)."""
    http_log = logging.getLogger("discord.http")
    if any(isinstance(f, _RateLimitWaits) for f in http_log.filters):
        return
    http_log.addFilter(_RateLimitWaits())
    # The record has to be made to be counted, also when NERVE_LOG_LEVEL would not show it.
    if not http_log.isEnabledFor(logging.WARNING):
        http_log.setLevel(logging.WARNING)
