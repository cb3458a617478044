"""A local model service that speaks the chat-completions wire format, driven by a script.

The real `openai` client talks to it over loopback HTTP, so tests exercise the same request
encoding, response parsing, status codes and headers a hosted service would produce. It records
every request body, so a test can assert what the model *saw*, and it fails loudly: a request past
the end of the script is answered with a 500 *and* recorded as a violation, which `assert_no_violations()`
(and, by default, leaving the `async with` block) turns into a test failure.

Two ways to drive it:

* a script — a list of steps consumed in order (`reply`, `tool_reply`, `rate_limited`, …);
* a responder — a callable `(request_json) -> step` for benchmarks that serve many conversations
  at once and cannot know the arrival order in advance.

A request with `"stream": true` gets the same scripted reply as server-sent events, the way OpenAI
streams it: `chat.completion.chunk` objects on `data:` lines and a closing `data: [DONE]`. Text comes
in small deltas; each tool call's id, name and arguments come in fragments split mid-string, the
fragments of parallel calls interleaved by `index`; `finish_reason` rides on the last choice chunk,
and a usage chunk (`choices: []`) follows only when `stream_options.include_usage` was asked. A
`Reply` can pace the chunks and break the stream (cut, provider error event, stall); the server can
imitate providers that reject `stream_options` or streaming altogether.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from aiohttp import web

from bot.text.turn_note import note_of, split_note
from bot.types import ChatMessage, Usage

# --------------------------------------------------------------------------------------------- steps


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeCall:
    """One tool call the fake model makes. `arguments` is sent verbatim: it may be malformed JSON."""

    name: str
    arguments: str = "{}"
    # None: the server invents `call_<n>`. "" or a missing id can be asked for with `Reply.omit_ids`.
    id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A successful completion: text, tool calls, or both."""

    content: str | None = None
    tool_calls: tuple[FakeCall, ...] = ()
    # "estimate": a rough count from the request and reply sizes; None: no `usage` field at all.
    usage: Usage | Literal["estimate"] | None = "estimate"
    finish_reason: str | None = None
    # Some OpenAI-compatible servers send tool calls without ids; this imitates them.
    omit_ids: bool = False
    # Before the answer starts (before the response headers, streamed or not).
    delay: float = 0.0
    # --- streamed answers only --------------------------------------------------------------------
    # Characters of text per delta, and of a tool call's id, name or arguments per fragment.
    chunk_chars: int = 4
    fragment_chars: int = 3
    # Fragments of parallel calls take turns by `index` (as some providers send them); False: one
    # call after the other (as OpenAI does).
    interleave: bool = True
    # Seconds between the headers and the first chunk, and between two chunks.
    first_token_delay: float = 0.0
    chunk_delay: float = 0.0
    # Faults, counted in chunks sent (the opening role chunk counts): after that many chunks the
    # connection is closed without [DONE] (`cut_after`), a provider error event ends the stream
    # (`error_after`), or nothing comes for `stall` seconds (`stall_after`).
    cut_after: int | None = None
    error_after: int | None = None
    error_message: str = "The server had an error while processing your request."
    stall_after: int | None = None
    stall: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpError:
    """An error answer in OpenAI's shape, or a raw body when `raw_body` is given."""

    status: int
    message: str = ""
    type: str | None = None
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None
    delay: float = 0.0


Step = Reply | HttpError
Responder = Callable[[dict[str, Any]], Step | Awaitable[Step]]


def reply(
    content: str,
    *,
    usage: Usage | Literal["estimate"] | None = "estimate",
    delay: float = 0.0,
    **streaming: Any,
) -> Reply:
    """A plain text answer; `streaming` takes the `Reply` fields that shape a streamed answer."""
    return Reply(content=content, usage=usage, delay=delay, **streaming)


def tool_reply(*calls: FakeCall | tuple[str, str], content: str | None = None, delay: float = 0.0) -> Reply:
    """An answer that calls tools; `("name", '{"a": 1}')` is shorthand for a `FakeCall`."""
    made = tuple(c if isinstance(c, FakeCall) else FakeCall(name=c[0], arguments=c[1]) for c in calls)
    return Reply(content=content, tool_calls=made, delay=delay)


def rate_limited(retry_after: str | None = "1", *, headers: dict[str, str] | None = None) -> HttpError:
    """A 429 as OpenAI sends it; `retry_after` becomes the Retry-After header (None: no header)."""
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["Retry-After"] = retry_after
    return HttpError(
        status=429,
        message="Rate limit reached for requests. Please try again later.",
        type="requests",
        code="rate_limit_exceeded",
        headers=all_headers,
    )


def server_error(
    status: int = 500, message: str = "The server had an error while processing your request."
) -> HttpError:
    """A 5xx from the model service."""
    return HttpError(status=status, message=message, type="server_error", code=None)


def context_length_exceeded(*, style: Literal["openai", "vllm"] = "openai") -> HttpError:
    """A 400 for a prompt over the context window, as OpenAI or vLLM word it."""
    if style == "vllm":
        return HttpError(
            status=400,
            message=(
                "This model's maximum context length is 4096 tokens. However, you requested 5120 tokens "
                "(4608 in the messages, 512 in the completion). Please reduce the length of the messages "
                "or completion."
            ),
            type="BadRequestError",
            code=None,
        )
    return HttpError(
        status=400,
        message=(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in "
            "130512 tokens. Please reduce the length of the messages."
        ),
        type="invalid_request_error",
        code="context_length_exceeded",
    )


# -------------------------------------------------------------------------------------------- server


class ScriptViolation(AssertionError):
    """The code under test used the fake model in a way the test did not script."""


class FakeLLMServer:
    """`async with FakeLLMServer([reply("hi")]) as server:` then point a client at `server.base_url`."""

    def __init__(
        self,
        script: Sequence[Step] | Responder = (),
        *,
        strict: bool = True,
        model: str | None = None,
        reject_stream_options: bool = False,
        reject_stream: bool = False,
        refuse_images: bool = False,
        prompt_cache: bool = False,
    ) -> None:
        if callable(script):
            self._responder: Responder | None = script
            self._steps: list[Step] = []
        else:
            self._responder = None
            self._steps = list(script)
        self._strict = strict
        self._model = model
        # Imitate providers that answer 400 to `stream_options`, or to `stream: true` at all.
        self._reject_stream_options = reject_stream_options
        self._reject_stream = reject_stream
        # Imitate a text-only model: a request carrying an image part is answered 400, as vLLM and
        # OpenAI answer one for a model without vision.
        self.refuse_images = refuse_images
        # Imitate a provider's prompt cache: each request's prompt (its tools, then its messages) is
        # compared with the earlier ones, and the longest byte-identical prefix any of them had is its
        # cached part; an estimated usage counts the whole prompt and reports that part as
        # `prompt_tokens_details.cached_tokens`. `prompts` and `cached` hold each request's figures
        # (in tokens of 4 characters), in arrival order. A benchmark may set it for some requests only.
        self.prompt_cache: PromptCache | None = PromptCache() if prompt_cache else None
        self.prompts: list[int] = []
        self.cached: list[int] = []
        self._next_step = 0
        self._call_ids = 0
        self._closing = asyncio.Event()
        self._unstalled = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        # Parsed JSON bodies of every chat-completions request, in arrival order.
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.violations: list[str] = []
        # Requests answered 400 by `reject_stream_options` / `reject_stream` / `refuse_images` (no
        # script step used).
        self.rejected: list[dict[str, Any]] = []
        # GET /models lists these ids; with `api_key` set, a request carrying another key gets a 401
        # worded as OpenAI words it (with part of the key in the message, as OpenAI's does).
        self.models: list[str] = ["test-model"]
        self.api_key: str | None = None
        self.models_requests = 0

    # ------------------------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeLLMServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
        if exc_type is None and self._strict:
            self.assert_no_violations()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)
        app.router.add_get("/v1/models", self._list_models)
        app.router.add_get("/models", self._list_models)
        app.router.add_route("*", "/{tail:.*}", self._unknown_route)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def close(self) -> None:
        # Ends every scripted delay at once, so a slow step never holds up the test's teardown.
        self._closing.set()
        self._unstalled.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeLLMServer is not started; use `async with FakeLLMServer(...)`")
        return self._port

    @property
    def base_url(self) -> str:
        """What to pass as the OpenAI client's `base_url`."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------------------------------ assertions

    @property
    def remaining(self) -> int:
        return len(self._steps) - self._next_step

    def assert_complete(self) -> None:
        """Fail when scripted steps were never requested: the code under test called the model less."""
        if self.remaining:
            unused = self._steps[self._next_step :]
            raise ScriptViolation(
                f"FakeLLMServer: {len(unused)} scripted step(s) never requested "
                f"(served {self._next_step} of {len(self._steps)}); first unused: {unused[0]!r}"
            )

    def assert_no_violations(self) -> None:
        if self.violations:
            raise ScriptViolation("FakeLLMServer script violations:\n- " + "\n- ".join(self.violations))

    def last_messages(self) -> list[dict[str, Any]]:
        """The `messages` of the most recent request."""
        if not self.requests:
            raise ScriptViolation("FakeLLMServer: no request received yet")
        messages: list[dict[str, Any]] = self.requests[-1]["messages"]
        return messages

    # ------------------------------------------------------------------------------------ handling

    async def _unknown_route(self, request: web.Request) -> web.Response:
        problem = f"unexpected request {request.method} {request.path}"
        self.violations.append(problem)
        return _error_response(404, f"FakeLLMServer: {problem}", "invalid_request_error", "not_found")

    async def _list_models(self, request: web.Request) -> web.Response:
        """OpenAI's `GET /models`: the ids in `models`, or a 401 for a key other than `api_key`."""
        self.models_requests += 1
        if self.api_key is not None:
            given = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if given != self.api_key:
                shown = f"{given[:3]}{'*' * 8}{given[-4:]}"
                message = (
                    f"Incorrect API key provided: {shown}. You can find your API key at "
                    "https://platform.openai.com/account/api-keys."
                )
                return _error_response(401, message, "invalid_request_error", "invalid_api_key")
        data = [{"id": name, "object": "model", "created": 0, "owned_by": "fake"} for name in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.text()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as exc:
            return self._refuse(f"request body is not JSON ({exc.msg})")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or "model" not in body:
            return self._refuse("request body needs 'model' and a 'messages' list")
        self.requests.append(body)
        self.request_headers.append(dict(request.headers))
        streaming = bool(body.get("stream"))
        if "stream_options" in body and not streaming:
            # OpenAI refuses this too: stream_options means nothing without stream=true.
            return self._refuse("stream_options was sent without stream=true")
        if streaming and self._reject_stream:
            self.rejected.append(body)
            return _error_response(
                400,
                "Streaming is not supported by this server: 'stream' must be false.",
                "invalid_request_error",
                None,
            )
        if "stream_options" in body and self._reject_stream_options:
            self.rejected.append(body)
            return _error_response(
                400, "Unrecognized request argument supplied: stream_options", "invalid_request_error", None
            )

        if self.refuse_images and image_parts(body):
            self.rejected.append(body)
            return _error_response(
                400,
                "Invalid content type. image_url is only supported by certain models: this model does not"
                " support image input.",
                "invalid_request_error",
                None,
            )

        step = await self._next(body)
        if step is None:
            problem = (
                f"request #{len(self.requests)} arrived after the script ended "
                f"({len(self._steps)} step(s)); last message: {_short(body['messages'][-1])}"
            )
            self.violations.append(problem)
            return _error_response(500, f"FakeLLMServer: {problem}", "script_exhausted", "script_exhausted")

        await self._pause(step.delay)
        if isinstance(step, HttpError):
            if step.raw_body is not None:
                return web.Response(status=step.status, text=step.raw_body, headers=step.headers)
            return _error_response(step.status, step.message, step.type, step.code, step.headers)
        completion = self._completion(body, step)
        if not streaming:
            return web.json_response(completion)
        return await self._stream(request, body, step, completion)

    def unstall(self) -> None:
        """End the current stall, and any later one, at once (a test saw what it needed meanwhile)."""
        self._unstalled.set()

    async def _pause(self, seconds: float, *, until: asyncio.Event | None = None) -> None:
        """Wait, but end at once when the server closes, so a slow step never holds up teardown."""
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for((until or self._closing).wait(), timeout=seconds)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], step: Reply, completion: dict[str, Any]
    ) -> web.StreamResponse:
        """The reply as server-sent events, paced and broken as the step says."""
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        chunks = stream_chunks(completion, step, include_usage=include_usage)
        # Chunks with no pause between them go out in one write, as a fast server's would.
        pending: list[bytes] = []

        async def flush() -> None:
            if pending:
                await response.write(b"".join(pending))
                pending.clear()

        try:
            await self._pause(step.first_token_delay)
            for sent, chunk in enumerate(chunks):
                if sent == step.cut_after:
                    await flush()
                    # Leave without the closing chunk of the body: the client sees the connection drop.
                    if request.transport is not None:
                        request.transport.close()
                    return response
                if sent == step.error_after:
                    error = {"message": step.error_message, "type": "server_error", "code": None}
                    pending.append(_event({"error": error}))
                    await flush()
                    await response.write_eof()
                    return response
                if sent == step.stall_after:
                    await flush()
                    await self._pause(step.stall, until=self._unstalled)
                elif sent and step.chunk_delay:
                    await flush()
                    await self._pause(step.chunk_delay)
                pending.append(_event(chunk))
            pending.append(b"data: [DONE]\n\n")
            await flush()
            await response.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client stopped listening (a stall it gave up on, a cancelled turn)
        return response

    def _refuse(self, problem: str) -> web.Response:
        self.violations.append(problem)
        return _error_response(400, f"FakeLLMServer: {problem}", "invalid_request_error", "fake_refused")

    async def _next(self, body: dict[str, Any]) -> Step | None:
        if self._responder is not None:
            produced = self._responder(body)
            if inspect.isawaitable(produced):
                produced = await produced
            return produced
        if self._next_step >= len(self._steps):
            return None
        step = self._steps[self._next_step]
        self._next_step += 1
        return step

    def _completion(self, body: dict[str, Any], step: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if step.tool_calls:
            calls = []
            for call in step.tool_calls:
                self._call_ids += 1
                wire: dict[str, Any] = {
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                if not step.omit_ids:
                    wire = {"id": call.id or f"call_fake_{self._call_ids}", **wire}
                calls.append(wire)
            message["tool_calls"] = calls
        finish = step.finish_reason or ("tool_calls" if step.tool_calls else "stop")
        out: dict[str, Any] = {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self._model or body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        }
        usage = step.usage
        cached: int | None = None
        prompt_tokens = max(1, len(json.dumps(body["messages"])) // 4)
        if self.prompt_cache is not None:
            text = prompt_text(body)
            prompt_tokens, cached = max(1, len(text) // 4), self.prompt_cache.seen(text) // 4
            self.prompts.append(prompt_tokens)
            self.cached.append(cached)
        if usage == "estimate":
            usage = Usage(
                prompt_tokens=prompt_tokens, completion_tokens=max(1, len(json.dumps(message)) // 4)
            )
        if isinstance(usage, Usage):
            out["usage"] = {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            }
            if cached is not None and step.usage == "estimate":
                out["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
            elif usage.cached_tokens:
                out["usage"]["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
        return out


def prompt_text(body: dict[str, Any]) -> str:
    """A request's prompt as a provider lays it out before tokenising: the tools, then each message."""
    parts = [json.dumps(body.get("tools") or [], ensure_ascii=False)]
    parts += [json.dumps(message, ensure_ascii=False) for message in body["messages"]]
    return "\n".join(parts)


class PromptCache:
    """The prompts seen so far, and how long a prefix of a new one any of them shares (in characters)."""

    # The newest prompts compared against: a provider keeps its cache minutes, not for ever.
    KEPT = 256

    def __init__(self) -> None:
        self._prompts: list[str] = []

    def seen(self, text: str) -> int:
        longest = max((_common_prefix(text, earlier) for earlier in self._prompts), default=0)
        self._prompts = [*self._prompts[-(self.KEPT - 1) :], text]
        return longest


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix, by halving (each comparison of slices runs in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def image_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The image parts of a recorded request, in order: `{"type": "image_url", "image_url": {"url": …}}`."""
    return [
        part
        for message in body["messages"]
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if isinstance(part, dict) and part.get("type") == "image_url"
    ]


def request_text(body: dict[str, Any]) -> str:
    """Every text a recorded request carried (text parts of multi-part messages too), one string."""
    texts: list[str] = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(part.get("text", "")) for part in content if isinstance(part, dict)]
        for call in message.get("tool_calls") or ():
            texts.append(str(call.get("function", {}).get("arguments", "")))
    return "\n".join(texts)


def told(body: dict[str, Any]) -> str:
    """What a recorded request told the model besides the conversation: its system prompt, then the
    turn's note its latest message ends with (the time now, the person's memories)."""
    messages = [ChatMessage(role=m["role"], content=_text_of(m.get("content"))) for m in body["messages"]]
    system = messages[0].content or "" if messages and messages[0].role == "system" else ""
    return f"{system}\n\n{note_of(messages)}"


def own_text(content: object) -> str:
    """A recorded message's text as its person wrote it: without the turn's note (parts as they are)."""
    return split_note(content)[0] if isinstance(content, str) else str(content)


def _text_of(content: object) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def stream_chunks(completion: dict[str, Any], step: Reply, *, include_usage: bool) -> list[dict[str, Any]]:
    """The chunks of a streamed `completion`, as OpenAI's wire format has them (without [DONE])."""
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = completion["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    text = message.get("content") or ""
    out = [chunk({"role": "assistant", "content": "" if text or not message.get("tool_calls") else None})]
    size = max(1, step.chunk_chars)
    out += [chunk({"content": text[i : i + size]}) for i in range(0, len(text), size)]

    per_call = [
        _fragments(index, call, step.fragment_chars)
        for index, call in enumerate(message.get("tool_calls") or ())
    ]
    if step.interleave:
        ordered = [f for group in itertools.zip_longest(*per_call) for f in group if f is not None]
    else:
        ordered = [f for fragments in per_call for f in fragments]
    out += [chunk({"tool_calls": [fragment]}) for fragment in ordered]

    out.append(chunk({}, choice["finish_reason"]))
    if include_usage and "usage" in completion:
        out.append(base | {"choices": [], "usage": completion["usage"]})
    return out


def _fragments(index: int, call: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """One call's id, then name, then arguments, each cut every `size` characters (mid-string)."""
    size = max(1, size)

    def pieces(text: str) -> list[str]:
        return [text[i : i + size] for i in range(0, len(text), size)]

    out: list[dict[str, Any]] = [{"index": index, "type": "function", "function": {}}]
    out += [{"index": index, "id": piece, "function": {}} for piece in pieces(call.get("id") or "")]
    out += [{"index": index, "function": {"name": piece}} for piece in pieces(call["function"]["name"])]
    out += [{"index": index, "function": {"arguments": p}} for p in pieces(call["function"]["arguments"])]
    return out


def _event(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _error_response(
    status: int,
    message: str,
    type_: str | None,
    code: str | None,
    headers: dict[str, str] | None = None,
) -> web.Response:
    body = {"error": {"message": message, "type": type_, "code": code, "param": None}}
    return web.json_response(body, status=status, headers=headers)


def _short(message: Any) -> str:
    text = json.dumps(message, ensure_ascii=False)
    return text if len(text) <= 200 else text[:200] + "…"
