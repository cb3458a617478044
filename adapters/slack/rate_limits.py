"""Slack's 429s, waited out as slack_sdk does and counted for `/metrics`."""

from __future__ import annotations

import time

from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from bot.observe import metrics


class CountedRateLimitHandler(AsyncRateLimitErrorRetryHandler):
    """The SDK's own handler (it honours Retry-After); each wait is counted as a Slack rate-limit wait."""

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        started = time.monotonic()
        await super().prepare_for_next_attempt_async(
            state=state, request=request, response=response, error=error
        )
        metrics.rate_limit_wait("slack", time.monotonic() - started)
