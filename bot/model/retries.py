"""What a failed request to the model service means: another try after a wait, or a typed error.

Reading statuses, `Retry-After` and the many wordings of "prompt too long" is a job of its own, and
the waits are chosen once for every caller (`backoff_delay`).
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import re
import time
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass

import openai

from bot.errors import ContextTooLong, ImagesRefused, LLMError, LLMRateLimited, LLMUnavailable

BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
# A server asking us to wait longer than this gets a clear error instead of a silent multi-minute stall.
MAX_RETRY_AFTER = 60.0

# 408 and 409 are transient on OpenAI's side too (the SDK retries them); 5xx is the service failing,
# except 501: "not implemented" stays so however often it is asked, so it fails at once.
_RETRYABLE_STATUS = frozenset({408, 409})
_PERMANENT_SERVER_STATUS = frozenset({501})


# How OpenAI and the servers that imitate it word "the prompt is longer than the context window".
_CONTEXT_WORDINGS = (
    r"context[_ ]length[_ ]exceeded",
    r"maximum context length",
    r"context length of only",  # LM Studio
    r"exceeds? (?:the )?(?:model'?s? )?(?:maximum )?context",  # "exceeds the context window"
    r"exceed_context_size",  # llama.cpp error type
    r"exceeds the available context size",  # llama.cpp
    r"context (?:window|size) (?:is )?(?:exceeded|too small)",
    r"too many tokens",
    r"prompt is too long",
    r"input (?:is )?too long",
    r"input length exceeds",
    r"longer than the maximum model length",  # vLLM
    r"reduce the length of the messages",
)
CONTEXT_PATTERNS = re.compile("|".join(_CONTEXT_WORDINGS), re.IGNORECASE)

# How a provider says a model takes no image input ("image input is not supported", "this model
# does not support vision", "multimodal input not enabled", "Invalid content type. image_url is only
# supported by certain models"): it speaks of images and of what the model cannot take. A 400 about
# one image (its size, a bad URL) is not a model that cannot see.
IMAGE_PATTERNS = re.compile(r"image|vision|multi-?modal", re.IGNORECASE)
_CANNOT_TAKE = re.compile(r"support|enabled|allowed|accept|capab|cannot|can't|unable", re.IGNORECASE)
_REFUSED_REQUEST_STATUS = frozenset({400, 415, 422})


@dataclass(slots=True)
class Retryable:
    """A failure worth another try: the error to raise if the budget runs out, and how to say so."""

    error: LLMError
    _: KW_ONLY
    progress_text: str
    retry_after: float | None = None
    max_retries: int = 1_000


def exhausted(error: LLMError, retries: int) -> LLMError:
    if retries == 0:
        return error
    return type(error)(
        f"{error.message} (still failing after {retries} {'retry' if retries == 1 else 'retries'})"
    )


def classify_status(exc: openai.APIStatusError, model: str) -> Retryable:
    """A refused request's status: a retryable failure comes back, the rest raise their typed error here."""
    status = exc.status_code
    detail = server_message(exc)
    code = exc.code or ""
    if status == 413 or CONTEXT_PATTERNS.search(f"{code} {exc.type or ''} {detail}"):
        raise too_long(detail) from None
    if status == 429:
        if code == "insufficient_quota":
            raise LLMError(f"the model service account is out of quota (429): {detail}") from None
        headline = "the model service is rate limiting requests (429)"
        return Retryable(
            LLMRateLimited(f"{headline}: {detail}", headline=headline),
            progress_text="rate limited",
            retry_after=retry_after_seconds(exc.response.headers),
        )
    if (status >= 500 and status not in _PERMANENT_SERVER_STATUS) or status in _RETRYABLE_STATUS:
        headline = f"the model service failed ({status})"
        return Retryable(
            LLMUnavailable(f"{headline}: {detail}", headline=headline),
            progress_text=f"model service error ({status})",
            retry_after=retry_after_seconds(exc.response.headers),
        )
    said = f"{code} {exc.param or ''} {detail}"
    if status in _REFUSED_REQUEST_STATUS and IMAGE_PATTERNS.search(said) and _CANNOT_TAKE.search(said):
        raise ImagesRefused(
            f"the model service refused the images in the request ({status}): {detail}"
        ) from None
    if status == 401:
        # The provider's message may quote part of the key: it must not reach people or a log.
        raise LLMError("the model service rejected the API key (401); check OPENAI_API_KEY") from None
    if status == 404:
        raise LLMError(
            f"the model service does not know model '{model}' or this endpoint (404); "
            f"check NERVE_MODEL and OPENAI_BASE_URL: {detail}"
        ) from None
    raise LLMError(f"the model service refused the request ({status}): {detail}") from None


def too_long(detail: str) -> ContextTooLong:
    return ContextTooLong(f"the conversation is longer than the model's context window: {detail}")


def backoff_delay(attempt: int, *, base: float = BACKOFF_BASE, cap: float = BACKOFF_CAP) -> float:
    """Full jitter in [0, min(cap, base·2^attempt)]: conversations that failed together retry apart."""
    return random.uniform(0.0, min(cap, base * 2.0**attempt))


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a server asked for, from `retry-after-ms` or `Retry-After` (seconds or HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(millis) / 1000.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def server_message(exc: openai.APIStatusError) -> str:
    """The server's own words: OpenAI's `error.message`, a bare string error, or the raw body."""
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message") or body.get("detail") or body.get("error")
        text = message if isinstance(message, str) else exc.message
    elif isinstance(body, str) and body.strip():
        text = body.strip()
    else:
        text = exc.message
    return one_line(text, 300)


def one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    if cause is None:
        return exc.message if isinstance(exc, openai.APIError) else str(exc)
    return str(cause) or type(cause).__name__
