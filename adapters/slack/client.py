"""The Slack Web API client nerve starts with, and the start-up calls that check its tokens.

A refused token or an unreachable Slack stops the start with one line that says what to fix
(`reaching_slack`), rather than an SDK traceback or a retry loop.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.rate_limits import CountedRateLimitHandler
from adapters.slack.retries import ConnectionErrorRetries, ServerErrorRetries
from adapters.slack.settings import SlackSettings
from bot.errors import ConfigError, StartupError


def require_bot_token(settings: SlackSettings) -> str:
    if settings.slack_bot_token is None or not settings.slack_bot_token.get_secret_value():
        raise ConfigError(
            "SLACK_BOT_TOKEN is not set: copy the Bot User OAuth Token (xoxb-…) from your Slack app"
        )
    return settings.slack_bot_token.get_secret_value()


def make_client(settings: SlackSettings, **kwargs: Any) -> AsyncWebClient:
    """A Web API client that waits out 429s (Retry-After) and retries broken connections and server
    errors, except for a turn's posts, which are found again instead (`adapters.slack.retries`)."""
    return AsyncWebClient(
        token=require_bot_token(settings),
        base_url=settings.slack_api_base_url,
        retry_handlers=[
            ConnectionErrorRetries(max_retry_count=2),
            CountedRateLimitHandler(max_retry_count=3),
            ServerErrorRetries(max_retry_count=2),
        ],
        **kwargs,
    )


REFUSED_TOKEN = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
    }
)


@asynccontextmanager
async def reaching_slack(settings: SlackSettings, token_name: str) -> AsyncIterator[None]:
    """A start-up call to Slack: a refused token or an unreachable Slack becomes one actionable line."""
    where = f"Slack at {settings.slack_api_base_url} (SLACK_API_BASE_URL)"
    try:
        yield
    except SlackApiError as exc:
        error = exc.response.get("error") or f"HTTP {exc.response.status_code}"
        if error in REFUSED_TOKEN:
            raise ConfigError(f"Slack refused {token_name} ({error})") from None
        raise StartupError(f"{where} answered {error}; is that the Slack Web API?") from None
    except (aiohttp.ClientError, SlackClientError, TimeoutError, OSError) as exc:
        raise StartupError(f"cannot reach {where}: {str(exc) or type(exc).__name__}") from None


class DropTokenNotice(logging.Filter):
    """bolt warns that SLACK_BOT_TOKEN in the environment goes unused when it is given a client: the
    client carries that very token, so the warning is noise (and turns a start-up error into two lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


def quiet_bolt_token_notice() -> None:
    bolt = logging.getLogger("slack_bolt.AsyncApp")
    if not any(isinstance(f, DropTokenNotice) for f in bolt.filters):
        bolt.addFilter(DropTokenNotice())
