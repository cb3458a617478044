"""`nerve worker`: a process that only runs Slack's jobs, for deployments that want more workers
than receivers.

Slack never delivers to it: it takes the jobs the receivers queued. It does no start-up recovery: a
dead worker's jobs run again elsewhere once its heartbeat stops (`bot.jobs`), and what a receiver left
unqueued is queued by a sweep or by that receiver's next start.
"""

from __future__ import annotations

import asyncio
import logging

from adapters.jobs_runtime import drained
from adapters.ops_http import OpsEndpoints, PlatformLink, always
from adapters.slack.app import SWEEP_SECONDS, running
from adapters.slack.installs import oauth_on
from adapters.slack.settings import SlackSettings
from bot.agent import Agent
from bot.errors import ConfigError

logger = logging.getLogger(__name__)

NO_DATABASE = "nerve worker shares jobs on PostgreSQL: set NERVE_DATABASE_URL"
NO_BOT_TOKEN = (
    "nerve worker posts the answers on Slack: set SLACK_BOT_TOKEN to the Bot User OAuth Token (xoxb-…)"
)


def check_settings(settings: SlackSettings) -> None:
    if settings.nerve_database_url is None:
        raise ConfigError(NO_DATABASE)
    many = oauth_on(settings)  # each workspace's token comes from its install ("Add to Slack")
    if not many and (settings.slack_bot_token is None or not settings.slack_bot_token.get_secret_value()):
        raise ConfigError(NO_BOT_TOKEN)


async def run_worker(
    agent: Agent,
    settings: SlackSettings,
    *,
    host: str | None = None,
    sweep_interval: float = SWEEP_SECONDS,
    ops_ready: asyncio.Future[str] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run Slack's jobs until cancelled, or until `stop` is set and the running jobs had their grace
    (the rest go back to the queue); /healthz, /readyz and /metrics answer at `host`."""
    check_settings(settings)
    bind = host or settings.nerve_http_host
    stop = stop or asyncio.Event()
    # "Connected to Slack" here means Slack took the bot token: the worker has no socket to lose.
    ops = OpsEndpoints(agent, PlatformLink("Slack"), ready=ops_ready, stopping=stop)
    async with running(agent, settings, ops, bind) as (bot, jobs):
        ops.platform.connected(always)
        bot.start_sweeper(sweep_interval)
        # It looks for due slots too, so schedules run while no `nerve slack` is up (each slot is one
        # job whichever processes look).
        bot.start_schedules()
        logger.info(
            "running Slack's jobs, up to %d at a time (NERVE_WORKER_CONCURRENCY)",
            settings.nerve_worker_concurrency,
        )
        await stop.wait()
        await drained(bot, jobs, settings.nerve_shutdown_grace)
