"""The Slack Web API client nerve starts with: what it sends again by itself, and the start-up calls
that check its tokens.

slack_sdk resends a call after a broken connection or a 500/503, but a chat.postMessage may have been
stored all the same. A turn's posts are findable by their metadata (`adapters.slack.post`), so they
are sent inside `findable()` and the caller reads the thread back instead. A 429 is waited out for
every call and counted for `/metrics`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.settings import SlackSettings
from bot.errors import ConfigError, StartupError
from bot.observe import metrics

_FINDABLE: ContextVar[bool] = ContextVar("nerve_slack_findable_post", default=False)
# The token of the workspace the work in this task is for (installs in many workspaces): set where an
# event, a resumed approval or a schedule's run begins, inherited by the tasks it starts.
_WORKSPACE_TOKEN: ContextVar[str | None] = ContextVar("nerve_slack_workspace_token", default=None)


@contextmanager
def workspace_token(token: str | None) -> Iterator[None]:
    """Calls made inside (in this task and the tasks it starts) use `token`."""
    reset = _WORKSPACE_TOKEN.set(token)
    try:
        yield
    finally:
        _WORKSPACE_TOKEN.reset(reset)


def use_workspace_token(token: str | None) -> None:
    """From here on in this task (and the tasks it starts), calls use `token`."""
    _WORKSPACE_TOKEN.set(token)


# Runs what follows with the token of a workspace (by team id): `adapters.slack.installs`.
TeamEntry = Callable[[str], AbstractAsyncContextManager[None]]


@asynccontextmanager
async def no_team(team: str) -> AsyncIterator[None]:
    """One workspace (SLACK_BOT_TOKEN): the client's own token, whatever the team."""
    yield


class WorkspaceClient(AsyncWebClient):
    """One client for every workspace: each call carries the token of the workspace its work is for
    (`workspace_token`), or the client's own (SLACK_BOT_TOKEN) outside of one."""

    @property  # type: ignore[override]
    def token(self) -> str | None:
        return _WORKSPACE_TOKEN.get() or self._own_token

    @token.setter
    def token(self, value: str | None) -> None:
        self._own_token = value


@contextmanager
def findable() -> Iterator[None]:
    """Calls made inside (in this task) are not resent by the client: the caller finds out itself."""
    token = _FINDABLE.set(True)
    try:
        yield
    finally:
        _FINDABLE.reset(token)


def in_doubt(exc: BaseException) -> bool:
    """Whether a failed call may have been carried out all the same (broken connection, timeout, 5xx)."""
    if isinstance(exc, SlackApiError):
        return exc.response is not None and exc.response.status_code >= 500
    return isinstance(exc, aiohttp.ClientConnectionError | TimeoutError)


class _NotForFindablePosts(AsyncRetryHandler):
    """A retry handler of the SDK that leaves a findable post alone (mixed in before the handler)."""

    async def _can_retry_async(self, **call: Any) -> bool:
        return not _FINDABLE.get() and await super()._can_retry_async(**call)


class ConnectionErrorRetries(_NotForFindablePosts, AsyncConnectionErrorRetryHandler):
    """The SDK's resend after a broken connection, for every call but a findable post."""


class ServerErrorRetries(_NotForFindablePosts, AsyncServerErrorRetryHandler):
    """The SDK's resend after a 500/503, for every call but a findable post."""


class CountedRateLimitHandler(AsyncRateLimitErrorRetryHandler):
    """The SDK's own handler (it honours Retry-After); each wait is counted as a Slack rate-limit wait."""

    async def prepare_for_next_attempt_async(self, **call: Any) -> None:
        started = time.monotonic()
        await super().prepare_for_next_attempt_async(**call)
        metrics.rate_limit_wait("slack", time.monotonic() - started)


def require_bot_token(settings: SlackSettings) -> str:
    if settings.slack_bot_token is None or not settings.slack_bot_token.get_secret_value():
        raise ConfigError(
            "SLACK_BOT_TOKEN is not set: copy the Bot User OAuth Token (xoxb-…) from your Slack app"
        )
    return settings.slack_bot_token.get_secret_value()


def make_client(settings: SlackSettings, **kwargs: Any) -> AsyncWebClient:
    """A Web API client that waits out 429s and retries broken connections and 5xx, but `findable` posts.
    With installs in many workspaces (SLACK_CLIENT_ID) it has no token of its own: each call carries
    its workspace's."""
    many = bool(settings.slack_client_id)
    return WorkspaceClient(
        token=None if many else require_bot_token(settings),
        base_url=settings.slack_api_base_url,
        retry_handlers=[
            ConnectionErrorRetries(max_retry_count=2),
            CountedRateLimitHandler(max_retry_count=3),
            ServerErrorRetries(max_retry_count=2),
        ],
        **kwargs,
    )


REFUSED_TOKEN = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired"}
    | {"not_allowed_token_type"}
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


def _no_token_notice(record: logging.LogRecord) -> bool:
    """bolt warns that SLACK_BOT_TOKEN goes unused when given a client that carries that very token."""
    return "`token` will be unused" not in record.getMessage()


def quiet_bolt_token_notice() -> None:
    logging.getLogger("slack_bolt.AsyncApp").addFilter(_no_token_notice)  # added once, however often asked
