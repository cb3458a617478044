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
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

from aiohttp import web

from bot.types import Usage

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
    delay: float = 0.0


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
    content: str, *, usage: Usage | Literal["estimate"] | None = "estimate", delay: float = 0.0
) -> Reply:
    """A plain text answer."""
    return Reply(content=content, usage=usage, delay=delay)


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
    ) -> None:
        if callable(script):
            self._responder: Responder | None = script
            self._steps: list[Step] = []
        else:
            self._responder = None
            self._steps = list(script)
        self._strict = strict
        self._model = model
        self._next_step = 0
        self._call_ids = 0
        self._closing = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        # Parsed JSON bodies of every chat-completions request, in arrival order.
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.violations: list[str] = []

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
        app.router.add_route("*", "/{tail:.*}", self._unknown_route)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def close(self) -> None:
        # Ends every scripted delay at once, so a slow step never holds up the test's teardown.
        self._closing.set()
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

    async def _handle(self, request: web.Request) -> web.Response:
        raw = await request.text()
        try:
            body = json.loads(raw)
        except json.JSONDecodeError as exc:
            return self._refuse(f"request body is not JSON ({exc.msg})")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or "model" not in body:
            return self._refuse("request body needs 'model' and a 'messages' list")
        self.requests.append(body)
        self.request_headers.append(dict(request.headers))
        if body.get("stream"):
            return self._refuse(
                "streaming was requested, but this server (like nerve) only does stream=false"
            )

        step = await self._next(body)
        if step is None:
            problem = (
                f"request #{len(self.requests)} arrived after the script ended "
                f"({len(self._steps)} step(s)); last message: {_short(body['messages'][-1])}"
            )
            self.violations.append(problem)
            return _error_response(500, f"FakeLLMServer: {problem}", "script_exhausted", "script_exhausted")

        if step.delay > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=step.delay)
        if isinstance(step, HttpError):
            if step.raw_body is not None:
                return web.Response(status=step.status, text=step.raw_body, headers=step.headers)
            return _error_response(step.status, step.message, step.type, step.code, step.headers)
        return web.json_response(self._completion(body, step))

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
        if usage == "estimate":
            usage = Usage(
                prompt_tokens=max(1, len(json.dumps(body["messages"])) // 4),
                completion_tokens=max(1, len(json.dumps(message)) // 4),
            )
        if isinstance(usage, Usage):
            out["usage"] = {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            }
        return out


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
