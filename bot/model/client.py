"""The OpenAI-compatible model client: one call, our own retries, typed errors.

The SDK's retries are off so every wait is announced through `progress`; works with OpenAI and its
imitators (vLLM, Ollama, LM Studio, llama.cpp). A broken stream is retried while nothing was shown;
after that, `StreamCut` carries the shown text instead, so no answer is shown twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import openai
from openai import AsyncStream
from openai.types.chat import ChatCompletion

from bot.config import Settings
from bot.errors import LLMError, LLMRateLimited, LLMUnavailable, StreamCut
from bot.model.concurrency import ConcurrencyLimits
from bot.model.patience import seconds_left
from bot.model.retries import (
    CONTEXT_PATTERNS,
    MAX_RETRY_AFTER,
    Retryable,
    backoff_delay,
    cause,
    classify_status,
    exhausted,
    one_line,
    server_message,
    too_long,
)
from bot.model.stream import StreamAssembler
from bot.observe import metrics
from bot.observe.tracing import model_span
from bot.types import ChatMessage, Completion, Progress, ToolCall, ToolSpec, TurnEvent, Usage

logger = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
StreamMode = Literal["auto", "on", "off"]

# Connecting either works quickly or not at all; the read timeout is what covers a slow model.
CONNECT_TIMEOUT = 10.0

# Statuses a provider answers an unsupported request field with (then its message names the field).
_REFUSED_FIELD_STATUS = frozenset({400, 422, 501})
_NAMES_STREAM_OPTIONS = re.compile(r"stream_options", re.IGNORECASE)
_NAMES_STREAM = re.compile(r"\bstream(?:ing)?\b", re.IGNORECASE)


class OpenAILLM:
    """The `LLM` seam over any chat-completions endpoint."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float,
        max_retries: int,
        temperature: float | None = None,
        stream: StreamMode = "auto",
        stream_stall: float = 30.0,
        sleep: Sleep = asyncio.sleep,
        name: str | None = None,
        limits: ConcurrencyLimits | None = None,
    ) -> None:
        self._model = model
        # What logs and metrics call this model: its name in the `models` list, else the model's own.
        self.name = name or model
        # Where each request's outcome is reported, so the turns let in at once follow the model
        # (under its name, as the gate asks for it).
        self._limit = limits.of(self.name) if limits is not None else None
        self._timeout = timeout
        self._stream_mode = stream
        # What this provider accepts, learnt from its first refusal and kept for the process.
        self._streaming = stream != "off"
        self._stream_options = True
        # The read timeout would notice a silent stream too, but only after NERVE_LLM_TIMEOUT.
        self._stall = min(stream_stall, timeout)
        self._max_retries = max_retries
        self._temperature = temperature
        self._sleep = sleep
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            # Local servers (vLLM, Ollama, …) accept anything, but the SDK insists on some key.
            api_key=api_key or "not-needed",
            max_retries=0,
            timeout=openai.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT)),
        )
        # For messages and logs: a URL may carry credentials (https://user:pass@host), so drop them.
        url = self._client.base_url
        self._where = str(url.copy_with(username=None, password=None) if url.userinfo else url).rstrip("/")
        self._id_prefix = secrets.token_hex(4)
        self._ids = itertools.count(1)

    @classmethod
    def from_settings(cls, settings: Settings, limits: ConcurrencyLimits | None = None) -> OpenAILLM:
        return cls(
            limits=limits,
            model=settings.nerve_model,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key.get_secret_value() if settings.openai_api_key else None,
            timeout=settings.nerve_llm_timeout,
            max_retries=settings.nerve_llm_max_retries,
            stream=settings.nerve_llm_stream,
            stream_stall=settings.nerve_llm_stream_stall,
        )

    def __repr__(self) -> str:
        return f"OpenAILLM(model={self._model!r}, base_url={self._where!r})"

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        """One model call, retried on 429, 5xx, timeouts and connection errors within the budget."""
        request: dict[str, Any] = {"model": self._model, "messages": [m.to_openai() for m in messages]}
        if tools:
            # By name: the order servers connected in must not change the request's cached start.
            request["tools"] = [t.to_openai() for t in sorted(tools, key=lambda t: t.name)]
        if self._temperature is not None:
            request["temperature"] = self._temperature

        attempt = 0
        while True:
            with model_span(self._model):
                failure = await self._reported(request, progress)
            if isinstance(failure, Completion):
                return failure
            if failure is None:
                continue  # the provider refused a streaming field: asked again at once, without it
            error = failure.error
            # A wait past the turn's end only ends the turn: said at once, so a fallback can answer.
            longest = min(MAX_RETRY_AFTER, left) if (left := seconds_left()) is not None else MAX_RETRY_AFTER
            if failure.retry_after is not None and failure.retry_after > longest:
                # Asked for a longer pause than anyone waits for an answer: said at once, with when.
                wait = failure.retry_after
                said = f"{error.message.rstrip('.')}; the service asks to wait {wait:.0f} s"
                raise type(error)(said, retry_after=wait, headline=error.headline)
            budget = min(self._max_retries, failure.max_retries)
            if attempt >= budget:
                raise exhausted(error, attempt)
            wait = failure.retry_after if failure.retry_after is not None else backoff_delay(attempt)
            attempt += 1
            logger.warning(
                "model call failed (%s); retry %d of %d in %.1f s", error.message, attempt, budget, wait
            )
            text = f"{failure.progress_text}, retrying in {_seconds(wait)} s"
            await progress(TurnEvent(kind="retrying", message=text, retry_in=wait))
            if isinstance(error, LLMRateLimited):
                metrics.rate_limit_wait("model", wait)
            await self._sleep(wait)

    async def _reported(self, request: dict[str, Any], progress: Progress) -> Completion | Retryable | None:
        """One request, its outcome told to the model's concurrency limit (a 429, or an answer's latency)."""
        if self._limit is None:
            return await self._attempt(request, progress)
        ticket = self._limit.sent()
        try:
            outcome = await self._attempt(request, progress)
        except BaseException:
            self._limit.failed(ticket)
            raise
        if isinstance(outcome, Completion):
            self._limit.answered(ticket)
        elif isinstance(outcome, Retryable) and isinstance(outcome.error, LLMRateLimited):
            self._limit.rate_limited(ticket)
        else:
            self._limit.failed(ticket)
        return outcome

    @metrics.model_request
    async def _attempt(self, request: dict[str, Any], progress: Progress) -> Completion | Retryable | None:
        """One request: the answer, a failure worth retrying, or None when a streaming field was refused."""
        streaming = self._streaming
        body = dict(request)
        if streaming:
            body["stream"] = True
            if self._stream_options:
                body["stream_options"] = {"include_usage": True}
        try:
            # The request is already in wire form: `post` skips the SDK's per-message transform
            # of `create`, which re-walks the whole history on every round (tens of ms at 40 messages).
            if not streaming:
                response = await self._client.post("/chat/completions", body=body, cast_to=ChatCompletion)
                return await self._shown_whole(self._to_completion(response), progress)
            stream = await self._client.post(
                "/chat/completions",
                body=body,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=AsyncStream[object],
            )
        except openai.APIStatusError as exc:
            if streaming and self._learn_refusal(exc, body):
                return None
            return classify_status(exc, self._model)
        except openai.APITimeoutError:
            why = f"the model service at {self._where} did not answer within {self._timeout:g} s"
            return Retryable(LLMUnavailable(why), progress_text="model service timed out")
        except openai.APIConnectionError as exc:
            return Retryable(
                LLMUnavailable(f"could not reach the model service at {self._where} ({cause(exc)})"),
                progress_text="model service unreachable",
                # A refused connection is usually a wrong URL or a stopped server: one retry
                # covers a restart, more only keep the user waiting.
                max_retries=1,
            )
        async with stream:  # the connection is released on every way out, a cancelled turn too
            content_type = stream.response.headers.get("content-type", "")
            if "event-stream" not in content_type:
                return await self._shown_whole(await self._unstreamed(stream, content_type), progress)
            return await self._read(stream, progress)

    @staticmethod
    async def _shown_whole(completion: Completion, progress: Progress) -> Completion:
        """An answer that arrived in one piece is shown in one piece, so front ends need one path."""
        if completion.message.content:
            await progress(TurnEvent(kind="text", message=completion.message.content))
        return completion

    def _learn_refusal(self, exc: openai.APIStatusError, body: Mapping[str, Any]) -> bool:
        """True when the provider refused `stream_options` or streaming itself, remembered for the process."""
        if exc.status_code not in _REFUSED_FIELD_STATUS:
            return False
        said = f"{exc.param or ''} {exc.code or ''} {server_message(exc)}"
        if CONTEXT_PATTERNS.search(said):
            return False
        if "stream_options" in body and _NAMES_STREAM_OPTIONS.search(said):
            logger.warning("the model service refuses stream_options; usage figures may be missing")
            self._stream_options = False
            return True
        if self._stream_mode == "auto" and _NAMES_STREAM.search(said):
            logger.warning("the model service refuses streaming; answers will arrive whole")
            self._streaming = False
            return True
        return False

    async def _read(self, stream: AsyncStream[object], progress: Progress) -> Completion | Retryable:
        assembler = StreamAssembler()
        while True:
            # The first chunk may take as long as a whole answer used to; later ones come quickly.
            wait = self._timeout if assembler.chunks == 0 else self._stall
            try:
                async with asyncio.timeout(wait):
                    chunk = await anext(stream)
            except StopAsyncIteration:
                break
            except TimeoutError:
                return self._broken(assembler, f"nothing came for {wait:g} s")
            except openai.APITimeoutError:
                return self._broken(assembler, f"nothing came for {self._timeout:g} s")
            except openai.APIConnectionError as exc:
                if assembler.finished:
                    break  # only the usage figures after the end were lost
                return self._broken(assembler, f"the connection dropped: {cause(exc)}")
            except openai.APIError as exc:
                # An error event inside the stream: the provider gave up on this answer.
                if not assembler.text and CONTEXT_PATTERNS.search(f"{exc.code or ''} {exc.message}"):
                    raise too_long(exc.message) from None
                return self._broken(assembler, f"the service reported: {one_line(exc.message, 200)}")
            except ValueError:
                return self._broken(assembler, "it sent a chunk that is not JSON")
            if text := assembler.feed(chunk):
                await progress(TurnEvent(kind="text", message=text))
        if not assembler.finished:
            return self._broken(assembler, "the stream ended before the answer did")
        return assembler.completion(self._new_id)

    def _broken(self, assembler: StreamAssembler, why: str) -> Retryable:
        """A stream that broke off: retried while nothing was shown, else the shown text ends the turn."""
        if assembler.text:
            raise StreamCut(f"the model service stopped sending the answer ({why})", partial=assembler.text)
        broke = LLMUnavailable(f"the model service's answer broke off ({why})")
        return Retryable(broke, progress_text="model answer broke off")

    async def _unstreamed(self, stream: AsyncStream[object], content_type: str) -> Completion:
        """A 200 that is not an event stream: a server that ignores `stream`, or a web page, not the API."""
        raw = await stream.response.aread()
        data: object = None
        if "json" in content_type:
            with contextlib.suppress(ValueError):
                data = json.loads(raw)
        if isinstance(data, dict) and "choices" in data:
            data = ChatCompletion.construct(**data)
        return self._to_completion(data)

    def _new_id(self) -> str:
        # Ids for tool calls a server sent without one; the random part keeps them unique across
        # restarts, so a stored history never holds the same id for two different calls.
        return f"call_{self._id_prefix}_{next(self._ids)}"

    def _to_completion(self, response: object) -> Completion:
        if not isinstance(response, ChatCompletion):
            # A 200 with HTML or plain text: usually a base URL that points at a web page, not the API.
            raise LLMError(
                f"the service at {self._where} did not answer with a chat completion; "
                "check that OPENAI_BASE_URL points at the API (it usually ends in /v1)"
            )
        if not response.choices:
            raise LLMError("the model service answered with no choices")
        message = response.choices[0].message
        calls: list[ToolCall] = []
        for call in message.tool_calls or ():
            function = getattr(call, "function", None)
            custom = getattr(call, "custom", None)
            if function is not None:
                name, arguments = function.name, function.arguments
            elif custom is not None:
                name, arguments = custom.name, custom.input
            else:
                raise LLMError("the model service sent a tool call with neither a function nor a name")
            # Some servers omit the id or send ""; the agent keys results by it, so it must be unique.
            call_id = getattr(call, "id", None) or self._new_id()
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments or ""))
        content = "" if message.content is None and not calls else message.content
        usage = None
        if (counted := response.usage) is not None:
            details = counted.prompt_tokens_details
            usage = Usage(
                prompt_tokens=counted.prompt_tokens or 0,
                completion_tokens=counted.completion_tokens or 0,
                cached_tokens=(details.cached_tokens or 0) if details is not None else 0,
            )
        return Completion(
            message=ChatMessage(role="assistant", content=content, tool_calls=tuple(calls)),
            usage=usage,
        )


def _seconds(wait: float) -> str:
    if wait >= 10:
        return f"{wait:.0f}"
    return f"{wait:.1f}".rstrip("0").rstrip(".") or "0"
