"""Which failed Web API calls the client sends again by itself, and which it leaves to the caller.

slack_sdk resends a call after a broken connection or a 500/503, but a chat.postMessage may have been
stored all the same, and resent blindly it shows twice. A turn's posts are findable by their
metadata (`adapters.slack.post`), so they are sent inside `findable()` (a context variable: the
handlers never see the JSON body) and the caller reads the thread back instead. A 429 is still
waited out for every call: Slack stored nothing then.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

_FINDABLE: ContextVar[bool] = ContextVar("nerve_slack_findable_post", default=False)


@contextmanager
def findable() -> Iterator[None]:
    """Calls made inside (in this task) are not sent again by the client after a broken connection
    or a 5xx: the caller finds out itself whether they landed (`in_doubt`)."""
    token = _FINDABLE.set(True)
    try:
        yield
    finally:
        _FINDABLE.reset(token)


def in_doubt(exc: BaseException) -> bool:
    """Whether a failed call may have been carried out all the same: its connection broke or timed
    out, or Slack answered 5xx."""
    if isinstance(exc, SlackApiError):
        return exc.response is not None and exc.response.status_code >= 500
    return isinstance(exc, aiohttp.ClientConnectionError | TimeoutError)


class _NotForFindablePosts(AsyncRetryHandler):
    """A retry handler of the SDK that leaves a findable post alone (mixed in before the handler)."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        if _FINDABLE.get():
            return False
        return await super()._can_retry_async(state=state, request=request, response=response, error=error)


class ConnectionErrorRetries(_NotForFindablePosts, AsyncConnectionErrorRetryHandler):
    """The SDK's resend after a broken connection, for every call but a findable post."""


class ServerErrorRetries(_NotForFindablePosts, AsyncServerErrorRetryHandler):
    """The SDK's resend after a 500/503, for every call but a findable post."""
