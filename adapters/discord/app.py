"""nerve on Discord: slash commands, mentions, threads and DMs, with collapsible tool results.

`run_discord(agent, settings)` is what `nerve discord` runs. It keeps the client (`client.py`)
running: a client that dies is replaced, with a backoff that spares Discord's daily login budget;
what no restart can fix stops nerve with a message that says what to do. It also tells the
operations endpoints whether the gateway is up, and counts rate-limit waits for `/metrics`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
import discord

from adapters.discord.client import CurrentClient
from adapters.discord.client import NerveDiscordBot as NerveDiscordBot
from adapters.discord.client import point_discord_at as point_discord_at
from adapters.discord.settings import DiscordSettings
from adapters.jobs_runtime import drained, shared_jobs, work
from adapters.oauth_http import sign_in_endpoints
from adapters.ops_http import OpsEndpoints, PlatformLink
from bot.agent import Agent
from bot.errors import ConfigError, StartupError
from bot.observe import metrics

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

logger = logging.getLogger(__name__)

# Gateway close codes that no reconnect can fix: bad token, bad shard or intents setup.
FATAL_CLOSE_CODES = {
    4004: "authentication failed",
    4010: "invalid shard",
    4011: "sharding required",
    4012: "invalid API version",
    4013: "invalid intents",
    4014: "disallowed intents",
}


class ShardedNerveDiscordBot(NerveDiscordBot, discord.AutoShardedClient):
    """The same bot over one gateway connection per shard this process runs, only when
    NERVE_DISCORD_SHARD_COUNT is set: without a count, discord.py's auto-sharded client would
    connect to the gateway URL Discord names, bypassing DISCORD_GATEWAY_URL."""


def new_bot(
    agent: Agent,
    settings: DiscordSettings,
    *,
    jobs: TurnJobs | None = None,
    clients: CurrentClient | None = None,
) -> NerveDiscordBot:
    if settings.nerve_discord_shard_count is not None:
        shards = {"shard_count": settings.nerve_discord_shard_count, "shard_ids": settings.discord_shard_ids}
        return ShardedNerveDiscordBot(agent, settings, jobs=jobs, clients=clients, **shards)
    return NerveDiscordBot(agent, settings, jobs=jobs, clients=clients)


@dataclass(frozen=True, slots=True, kw_only=True)
class RestartPolicy:
    """How `run_discord` restarts a dead client without burning Discord's daily IDENTIFY budget."""

    initial: float = 2.0
    maximum: float = 300.0
    # A client that stayed up this long was healthy: the next failure starts from `initial` again.
    healthy_after: float = 600.0


def check_settings(settings: DiscordSettings) -> str:
    if settings.discord_bot_token is None:
        raise ConfigError(
            "DISCORD_BOT_TOKEN is not set: create a bot at https://discord.com/developers/applications"
        )
    return settings.discord_bot_token.get_secret_value()


async def run_discord(
    agent: Agent,
    settings: DiscordSettings,
    *,
    policy: RestartPolicy | None = None,
    ops_ready: asyncio.Future[str] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run the bot until cancelled, or until `stop` is set (SIGTERM: running turns and jobs get
    NERVE_SHUTDOWN_GRACE seconds). `ConfigError` for what no restart can fix, `StartupError` when
    Discord cannot be reached before the first login; `ops_ready` receives the endpoints' base URL."""
    token = check_settings(settings)
    stop = stop or asyncio.Event()
    policy = policy or RestartPolicy()
    ops = OpsEndpoints(agent, PlatformLink("Discord"), ready=ops_ready, stopping=stop)
    # The browser's way back after signing in, on the same port.
    sign_ins = sign_in_endpoints(agent, settings.nerve_public_url, "Discord")
    if sign_ins is not None:
        ops.routes.append(sign_ins.install)
    async with ops.serving(settings.nerve_http_host, settings.nerve_http_port), shared_jobs(settings) as jobs:
        clients = CurrentClient()
        if jobs is not None:
            work(jobs, clients, settings)
            ops.worker = jobs.worker_alive
        count_rate_limit_waits()
        # nerve never joins voice channels: the warnings about missing voice libraries are only noise.
        discord.VoiceClient.warn_nacl = discord.VoiceClient.warn_dave = False
        loop = asyncio.get_running_loop()
        delay = policy.initial
        logged_in = False  # once Discord answered a login, a later outage is one to wait out
        while True:
            bot = new_bot(agent, settings, jobs=jobs, clients=clients)
            ops.platform.connected(functools.partial(gateway_up, bot))
            if sign_ins is not None:
                sign_ins.resume = bot.approval_flow.resume_signed_in
            started = loop.time()
            failure: BaseException
            stopper = asyncio.create_task(_stop_when_asked(stop, bot, jobs, settings.nerve_shutdown_grace))
            try:
                async with bot:
                    await bot.start(token)
                return
            except (aiohttp.ClientConnectionError, OSError) as exc:
                logged_in = logged_in or bot.application is not None
                if not logged_in:
                    # Never reached Discord: a wrong address or no network, which restarts would not fix.
                    raise StartupError(
                        f"cannot reach Discord at {settings.discord_api_base_url} ({exc}): "
                        "check the network, or DISCORD_API_BASE_URL if you set it"
                    ) from None
                failure = exc
            except discord.LoginFailure:
                raise ConfigError(
                    "Discord rejected DISCORD_BOT_TOKEN (401 Unauthorized): copy the bot token again "
                    "from the Developer Portal (Bot → Reset Token)"
                ) from None
            except discord.PrivilegedIntentsRequired:
                raise ConfigError(
                    "Discord refused the Message Content intent: enable it for the bot in the Developer "
                    "Portal (Bot → Privileged Gateway Intents) or turn it off in nerve's settings"
                ) from None
            except discord.ConnectionClosed as exc:
                if exc.code in FATAL_CLOSE_CODES:
                    raise ConfigError(
                        f"Discord closed the gateway: {FATAL_CLOSE_CODES[exc.code]} (code {exc.code})"
                    ) from None
                failure = exc
            except (discord.DiscordException, aiohttp.ClientError, TimeoutError) as exc:
                failure = exc
            finally:
                if stop.is_set():
                    await stopper  # the drain and close under way end first
                else:
                    stopper.cancel()
            if stop.is_set():
                return
            logged_in = logged_in or bot.application is not None
            if loop.time() - started >= policy.healthy_after:
                delay = policy.initial
            logger.error(
                "the Discord client stopped (%s: %s); restarting in %.1f s",
                type(failure).__name__,
                failure,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, policy.maximum)


async def _stop_when_asked(
    stop: asyncio.Event, bot: NerveDiscordBot, jobs: TurnJobs | None, grace: float
) -> None:
    await stop.wait()
    await drained(bot, jobs, grace)
    await bot.close()


# discord.py announces each 429 it waits out with this record, and offers no other hook for it.
WAIT_RECORD = "We are being rate limited. %s %s responded with 429. Retrying in %.2f seconds."


def gateway_up(client: discord.Client) -> bool:
    """Past READY, the gateway socket open (a reconnect leaves `is_ready()` set); sharded, every shard's."""
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
    http_log = logging.getLogger("discord.http")
    if any(isinstance(f, _RateLimitWaits) for f in http_log.filters):
        return
    http_log.addFilter(_RateLimitWaits())
    # The record has to be made to be counted, also when NERVE_LOG_LEVEL would not show it.
    if not http_log.isEnabledFor(logging.WARNING):
        http_log.setLevel(logging.WARNING)
