"""A local stand-in for Slack: the Web API over HTTP and the Socket Mode websocket, on 127.0.0.1.

The real `slack_sdk` client (and so the real bolt app) talks to it over loopback, so tests see the
same request encoding (JSON or form), status codes and headers Slack would produce. Every call is
recorded with its parsed body; a test asserts on what the platform *received*. It can refuse
container blocks with `invalid_blocks`, answer a method with 429 + Retry-After (once, or every n-th
call), and play Slack's side of Socket Mode: `hello`, then `events_api` envelopes, recording the acks.
`drop_response_once` loses the answer to a call Slack carried out (the connection drops, or a 5xx
comes after the message was stored), as when a response is lost on its way back.

Files go up the way `files_upload_v2` sends them: files.getUploadURLExternal, the bytes to the
returned upload URL (on this fake; `fail_uploads` refuses some), then files.completeUploadExternal;
`shared` lists each completed file with its name, bytes, channel and thread.

Modals (views.open / views.update) take a `trigger_id` the fake issued (`trigger()`), good for one
use within 3 seconds as Slack's are, and are checked against Slack's documented limits (title and
buttons, blocks, labels, hints, options, ids, metadata); `view_payload` builds the
`view_submission` / `view_closed` body Slack sends when a person submits or closes one.

Files people share (`tests.fakes.slack_files`): `files.host(...)` keeps one and gives the object an
event's `files` holds; files.info and the private file URLs answer behind the bot token, and
`files.downloads` records every download.

Reactions (reactions.add / reactions.remove) are kept per message, with Slack's `already_reacted`
and `no_reaction` answers. Slack's pace for new messages in a channel (about one a second, short
bursts allowed) is off by default; `pace_posts(interval, burst)` turns it on: a chat.postMessage or
chat.startStream beyond it gets 429 with Retry-After, as Slack answers. Tests scale `interval` down.

Streaming messages (chat.startStream / appendStream / stopStream) are off by default, as in a
workspace without them (`unknown_method`); `streaming = True` turns them on, validated the way Slack
documents them: a thread is required, channels need the recipient user and team, markdown text is
at most 12,000 characters, chunks are well-formed, and only a message still streaming takes appends.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.slack_files import FakeFiles
from tests.fakes.slack_installs import FakeInstalls
from tests.fakes.slack_sessions import FakeSessions

BOT_USER_ID = "UBOT0001"
BOT_ID = "BBOT0001"
TEAM_ID = "T0000TEAM"
APP_ID = "A0000APP"


@dataclass(slots=True)
class ApiCall:
    """One Web API request as the fake received it."""

    method: str
    body: dict[str, Any]
    ok: bool
    error: str | None = None
    # The HTTP status it was answered with; 0 when the connection dropped without an answer.
    status: int = 200
    # When the fake received it (time.perf_counter), for latency figures.
    at: float = field(default_factory=time.perf_counter)


@dataclass(slots=True)
class Posted:
    """A message as it stands now (after any chat.update), with every version it went through."""

    channel: str
    ts: str
    thread_ts: str | None
    versions: list[dict[str, Any]] = field(default_factory=list)
    # A streaming message: True while it takes appends, False once stopped (or expired); None: a
    # message from chat.postMessage. Its versions hold the text so far, its tasks and final blocks.
    streaming: bool | None = None

    @property
    def current(self) -> dict[str, Any]:
        return self.versions[-1]

    @property
    def text(self) -> str:
        return str(self.current.get("text") or "")

    def everything(self) -> str:
        """Every version's text, blocks and attachments as one JSON string, for "never contains" checks."""
        return json.dumps(self.versions, ensure_ascii=False)


def _block_types(blocks: Iterable[Any]) -> set[str]:
    found: set[str] = set()
    for block in blocks:
        if isinstance(block, dict):
            found.add(str(block.get("type")))
            found |= _block_types(block.get("child_blocks") or [])
            found |= _block_types(block.get("tasks") or [])
    return found


STREAM_TEXT_LIMIT = 12_000
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
CHUNK_TYPES = frozenset({"markdown_text", "task_update", "plan_update", "blocks"})


def _chunk_problem(chunks: Any) -> str | None:
    """Slack's error for a malformed `chunks` array, or None when it is well-formed."""
    if not isinstance(chunks, list):
        return "invalid_chunks"
    for chunk in chunks:
        if not isinstance(chunk, dict) or chunk.get("type") not in CHUNK_TYPES:
            return "invalid_chunks"
        kind = chunk["type"]
        if kind == "markdown_text":
            if not isinstance(chunk.get("text"), str) or not chunk["text"]:
                return "invalid_chunks"
            if len(chunk["text"]) > STREAM_TEXT_LIMIT:
                return "msg_too_long"
        elif kind == "task_update":
            if not chunk.get("id") or not isinstance(chunk.get("title"), str):
                return "invalid_chunks"
            if chunk.get("status") not in TASK_STATUSES:
                return "invalid_chunks"
        elif not isinstance(chunk.get("title" if kind == "plan_update" else "blocks"), str | list):
            return "invalid_chunks"
    return None


TRIGGER_SECONDS = 3.0


@dataclass(slots=True)
class OpenView:
    """A modal as it stands now (after any views.update), with every version it went through."""

    id: str
    trigger_id: str
    versions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def current(self) -> dict[str, Any]:
        return self.versions[-1]


@dataclass(frozen=True, slots=True)
class LostAnswer:
    """How the next matching call loses its answer (`FakeSlack.drop_response_once`)."""

    status: int | None
    stored: bool
    when: Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, slots=True)
class SharedFile:
    """A file shared with files.completeUploadExternal: what was uploaded for it, and where it went."""

    id: str
    filename: str
    title: str | None
    alt_txt: str | None
    channel: str | None
    thread_ts: str | None
    data: bytes


def _plain_text_problem(where: str, value: Any, limit: int, *, required: bool = True) -> str | None:
    if value is None:
        return f"{where} is required" if required else None
    if (
        not isinstance(value, dict)
        or value.get("type") != "plain_text"
        or not isinstance(value.get("text"), str)
    ):
        return f"{where} must be a plain_text object"
    if not 1 <= len(value["text"]) <= limit:
        return f"{where} must be 1 to {limit} characters"
    return None


def _options_problem(where: str, element: dict[str, Any]) -> list[str]:
    options = element.get("options")
    if not isinstance(options, list) or not options:
        return [f"{where}: options are required"]
    problems = []
    if len(options) > 100:
        problems.append(f"{where}: at most 100 options")
    for option in options:
        text_problem = _plain_text_problem(f"{where}: option text", option.get("text"), 75)
        if text_problem:
            problems.append(text_problem)
        value = option.get("value")
        if not isinstance(value, str) or not 1 <= len(value) <= 150:
            problems.append(f"{where}: option value must be 1 to 150 characters")
    chosen = (
        [element["initial_option"]] if "initial_option" in element else element.get("initial_options", [])
    )
    for option in chosen:
        if option not in options:
            problems.append(f"{where}: an initial option is not one of the options")
    return problems


_LENGTH_LIMITED = frozenset({"plain_text_input"})
_WITH_OPTIONS = frozenset({"static_select", "multi_static_select", "radio_buttons", "checkboxes"})


def _element_problems(where: str, element: Any) -> list[str]:
    if not isinstance(element, dict) or not isinstance(element.get("type"), str):
        return [f"{where}: element is required"]
    problems = []
    action_id = element.get("action_id")
    if action_id is not None and not 1 <= len(str(action_id)) <= 255:
        problems.append(f"{where}: action_id must be 1 to 255 characters")
    placeholder = _plain_text_problem(
        f"{where}: placeholder", element.get("placeholder"), 150, required=False
    )
    if placeholder:
        problems.append(placeholder)
    kind = element["type"]
    if kind in _LENGTH_LIMITED:
        for name in ("min_length", "max_length"):
            value = element.get(name)
            if value is not None and not (0 <= int(value) <= 3000):
                problems.append(f"{where}: {name} must be at most 3000")
    if kind in _WITH_OPTIONS:
        problems += _options_problem(where, element)
    most = element.get("max_selected_items")
    if kind == "multi_static_select" and most is not None and int(most) < 1:
        problems.append(f"{where}: max_selected_items must be at least 1")
    return problems


def view_problems(view: Any) -> list[str]:
    """What Slack would refuse in a modal (`invalid_arguments`), per its documented limits."""
    if not isinstance(view, dict) or view.get("type") != "modal":
        return ["view must be a modal"]
    problems = [
        problem
        for problem in (
            _plain_text_problem("title", view.get("title"), 24),
            _plain_text_problem("submit", view.get("submit"), 24, required=False),
            _plain_text_problem("close", view.get("close"), 24, required=False),
        )
        if problem
    ]
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not 1 <= len(blocks) <= 100:
        return [*problems, "a modal holds 1 to 100 blocks"]
    if len(str(view.get("callback_id") or "")) > 255:
        problems.append("callback_id must be at most 255 characters")
    if len(str(view.get("private_metadata") or "")) > 3000:
        problems.append("private_metadata must be at most 3000 characters")
    ids = [b.get("block_id") for b in blocks if isinstance(b, dict) and b.get("block_id") is not None]
    if len(ids) != len(set(ids)) or any(len(str(i)) > 255 for i in ids):
        problems.append("block_id values must be unique and at most 255 characters")
    inputs = [b for b in blocks if isinstance(b, dict) and b.get("type") == "input"]
    if inputs and view.get("submit") is None:
        problems.append("a modal with inputs needs a submit button")
    for index, block in enumerate(inputs):
        where = f"input {index} ({block.get('block_id')})"
        for problem in (
            _plain_text_problem(f"{where}: label", block.get("label"), 2000),
            _plain_text_problem(f"{where}: hint", block.get("hint"), 2000, required=False),
        ):
            if problem:
                problems.append(problem)
        problems += _element_problems(where, block.get("element"))
    return problems


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class FakeSlack:
    """`async with FakeSlack() as slack:` then point AsyncWebClient(base_url=slack.api_url) at it."""

    def __init__(self) -> None:
        self.calls: list[ApiCall] = []
        self.posted: list[Posted] = []
        self.uploads: dict[str, bytes] = {}
        # Files completed with files.completeUploadExternal, in order; `fail_uploads` makes that many
        # of the next uploads to the upload URL answer 400 (not retried), as a refusing upload server.
        self.shared: list[SharedFile] = []
        self.fail_uploads = 0
        self._upload_names: dict[str, dict[str, Any]] = {}
        self.acks: list[dict[str, Any]] = []
        # Block types chat.postMessage / chat.update refuse with `invalid_blocks` (e.g. {"container"}).
        self.refuse_block_types: set[str] = set()
        # Methods that answer the next call with an error code ({"assistant.threads.setStatus": "…"}).
        self.fail_next: dict[str, str] = {}
        self._fail_when: dict[str, tuple[str, Callable[[dict[str, Any]], bool]]] = {}
        # chat.startStream / appendStream / stopStream: off answers them with `streaming_error`.
        self.streaming = False
        self.streaming_error = "unknown_method"
        # auth.test answers with the `x-oauth-scopes` header Slack sends: the scopes the token was
        # granted, comma-separated (None: no header).
        self.scopes: list[str] | None = None
        self._rate_limit_next: dict[str, int] = {}
        self._rate_limit_every: dict[str, tuple[int, int]] = {}
        self._lose_next: dict[str, LostAnswer] = {}
        # Reactions on each message: (channel, ts) → names.
        self.reactions: dict[tuple[str, str], set[str]] = {}
        # The per-channel pace of new messages (`pace_posts`): None is off.
        self._post_pace: tuple[float, float] | None = None
        self._post_tokens: dict[str, tuple[float, float]] = {}
        self.paced_refusals = 0
        self._seen: Counter[str] = Counter()
        self._ts = itertools.count(1)
        self._changed = asyncio.Condition()
        # Modals opened with views.open, and the trigger ids issued with `trigger()` (id → expiry).
        self.views: list[OpenView] = []
        self._triggers: dict[str, float] = {}
        self._view_ids = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._sockets: list[web.WebSocketResponse] = []
        self._socket_open = asyncio.Event()
        # users.info: each user's profile time zone (`tz`); a user not named here is not found.
        self.zones: dict[str, str] = {}
        # Files shared in the workspace: files.info and their private URLs (`tests.fakes.slack_files`).
        self.files = FakeFiles(lambda: self.base)
        # Agent sessions (`tests.fakes.slack_sessions`): setStatus and rename, per thread.
        self.sessions = FakeSessions()
        # Workspaces with their own tokens, and "Add to Slack" (`tests.fakes.slack_installs`).
        self.installs = FakeInstalls()
        # An outage (`start_outage`): Socket Mode connections dropped, new ones and
        # apps.connections.open answered 503, until `end_outage`.
        self.out = False

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> FakeSlack:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_get("/api/{method}", self._api)  # the SDK reads some methods with GET
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/socket", self._socket)
        self.files.routes(app, lambda: self.scopes)
        self.installs.routes(app)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self._port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def api_url(self) -> str:
        """What to pass as AsyncWebClient's `base_url` (SLACK_API_BASE_URL)."""
        return f"{self.base}/api/"

    # --- knobs -------------------------------------------------------------------------------

    async def start_outage(self) -> None:
        """Slack goes away for Socket Mode: open connections close, reconnecting fails (503)."""
        self.out = True
        self._socket_open.clear()
        for ws in list(self._sockets):
            await ws.close()

    def end_outage(self) -> None:
        self.out = False

    def fail_once(self, method: str, error: str, when: Callable[[dict[str, Any]], bool]) -> None:
        """The next call of `method` whose body `when` accepts answers `error` (ok false, not retried)."""
        self._fail_when[method] = (error, when)

    def rate_limit_once(self, method: str, retry_after: int = 1) -> None:
        """The next call of `method` gets HTTP 429 with Retry-After, like Slack's rate limiter."""
        self._rate_limit_next[method] = retry_after

    def rate_limit_every(self, method: str, every: int, retry_after: int = 0) -> None:
        """Every `every`-th call of `method` (the n-th, 2n-th, …) gets HTTP 429 with Retry-After."""
        self._rate_limit_every[method] = (every, retry_after)

    def drop_response_once(
        self,
        method: str,
        *,
        status: int | None = None,
        stored: bool = True,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """The next call of `method` whose body `when` accepts loses its answer: Slack carries it out
        (a chat.postMessage is in the channel) and then drops the connection without answering, or
        answers `status` (a 5xx after storing). `stored=False` with a `status`: Slack failed before
        carrying it out, so nothing was posted."""
        assert stored or status is not None, "a call Slack did not carry out still gets an answer"
        self._lose_next[method] = LostAnswer(status, stored, when or (lambda _body: True))

    def pace_posts(self, interval: float, burst: int = 2) -> None:
        """New messages per channel at most one per `interval` seconds, `burst` at once after a quiet
        spell (a token bucket); beyond that, HTTP 429 with Retry-After in whole seconds (rounded down:
        the client adds up to a second of its own), as Slack paces posting in one channel."""
        self._post_pace = (interval, float(burst))

    def _post_refused(self, channel: str) -> float:
        """Seconds until `channel` takes a new message; 0 when it takes this one (a token spent)."""
        if self._post_pace is None:
            return 0.0
        interval, burst = self._post_pace
        now = time.monotonic()
        tokens, since = self._post_tokens.get(channel, (burst, now))
        tokens = min(burst, tokens + (now - since) / interval)
        if tokens >= 1:
            self._post_tokens[channel] = (tokens - 1, now)
            return 0.0
        self._post_tokens[channel] = (tokens, now)
        return (1 - tokens) * interval

    def reacted(self, channel: str, ts: str) -> set[str]:
        """The reactions on a message now."""
        return set(self.reactions.get((channel, ts), set()))

    def trigger(self, within: float = TRIGGER_SECONDS) -> str:
        """A new `trigger_id`, as Slack puts in a click's payload: views.open takes it once, in time."""
        trigger_id = f"{next(self._ts)}.{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:32]}"
        self._triggers[trigger_id] = time.monotonic() + within
        return trigger_id

    def expire_stream(self, ts: str) -> None:
        """Slack ended this message's streaming state (it waited too long for an append)."""
        for posted in self.posted:
            if posted.ts == ts and posted.streaming:
                posted.streaming = False

    # --- queries -----------------------------------------------------------------------------

    def calls_of(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    def streams(self) -> list[Posted]:
        """Messages started with chat.startStream, in order."""
        return [p for p in self.posted if p.streaming is not None]

    def view(self, view_id: str) -> OpenView:
        [found] = [v for v in self.views if v.id == view_id]
        return found

    def view_payload(
        self,
        kind: str,
        view: OpenView,
        user: str,
        values: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The body Slack sends when `user` submits (`view_submission`) or closes (`view_closed`) a
        modal: the view as it stands, with the inputs' state (block id → action id → value)."""
        current = view.current
        shown = {
            **current,
            "id": view.id,
            "team_id": TEAM_ID,
            "app_id": APP_ID,
            "bot_id": BOT_ID,
            "root_view_id": view.id,
            "previous_view_id": None,
            "hash": f"{len(view.versions)}.{view.id}",
            "state": {"values": values or {}},
        }
        body: dict[str, Any] = {
            "type": kind,
            "team": {"id": TEAM_ID, "domain": "nerve-test"},
            "user": {"id": user, "username": user.lower(), "team_id": TEAM_ID},
            "api_app_id": APP_ID,
            "token": "legacy",
            "view": shown,
        }
        if kind == "view_submission":
            body["trigger_id"] = self.trigger()
            body["response_urls"] = []
        else:
            body["is_cleared"] = False
        return body

    def thread(self, channel: str, thread_ts: str | None) -> list[Posted]:
        """Messages we posted in a thread (None: top level of the channel), in posting order."""
        return [p for p in self.posted if p.channel == channel and p.thread_ts == thread_ts]

    async def wait_for(self, check: Callable[[FakeSlack], bool], within: float = 10.0) -> None:
        """Wait until `check(self)` holds (re-checked after every call); fails after `within` seconds."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: check(self))

    # --- Web API -----------------------------------------------------------------------------

    async def _body(self, request: web.Request) -> dict[str, Any]:
        body: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            raw = await request.text()
            body.update(json.loads(raw) if raw else {})
        elif request.can_read_body:
            form = await request.post()
            body.update({k: v for k, v in form.items() if isinstance(v, str)})
        return {k: _maybe_json(v) for k, v in body.items()}

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        body = await self._body(request)
        self._seen[method] += 1
        auth = request.headers.get("Authorization")
        token = auth.removeprefix("Bearer ") if auth and auth.startswith("Bearer ") else body.get("token")
        self.installs.tokens.append((method, token, body))
        if self.out and method == "apps.connections.open":
            await self._record(ApiCall(method=method, body=body, ok=False, error="unavailable", status=503))
            return web.json_response({"ok": False, "error": "unavailable"}, status=503)
        every = self._rate_limit_every.get(method)
        if every is not None and self._seen[method] % every[0] == 0:
            self._rate_limit_next.setdefault(method, every[1])
        if method in self._rate_limit_next:
            retry_after = self._rate_limit_next.pop(method)
            await self._record(ApiCall(method=method, body=body, ok=False, error="ratelimited", status=429))
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": str(retry_after)}
            )
        if method in ("chat.postMessage", "chat.startStream"):
            wait = self._post_refused(str(body.get("channel") or ""))
            if wait > 0:
                self.paced_refusals += 1
                refused = ApiCall(method=method, body=body, ok=False, error="ratelimited", status=429)
                await self._record(refused)
                return web.json_response(
                    {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": str(int(wait))}
                )
        failing = self._fail_when.get(method)
        if failing is not None and failing[1](body):
            del self._fail_when[method]
            self.fail_next.setdefault(method, failing[0])
        if method in self.fail_next:
            error = self.fail_next.pop(method)
            await self._record(ApiCall(method=method, body=body, ok=False, error=error))
            return web.json_response({"ok": False, "error": error})
        if method in ("chat.postMessage", "chat.update") and _block_types(body.get("blocks") or []) & (
            self.refuse_block_types
        ):
            await self._record(ApiCall(method=method, body=body, ok=False, error="invalid_blocks"))
            return web.json_response({"ok": False, "error": "invalid_blocks", "errors": ["unsupported type"]})
        lost = self._lost(method, body)
        if lost is not None and not lost.stored:
            assert lost.status is not None
            await self._record(
                ApiCall(method=method, body=body, ok=False, error="fatal_error", status=lost.status)
            )
            return web.json_response({"ok": False, "error": "fatal_error"}, status=lost.status)
        if method in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
            answer = self._stream(method, body)
        elif method == "files.info":
            answer = self.files.info(body, request, self.scopes)
        elif method in ("agents.sessions.setStatus", "agents.sessions.rename"):
            answer = self.sessions.answer(method, body, self.scopes)
        else:
            answer = self.installs.answer(method, body, token, auth) or self._answer(method, body)
        status = 200 if lost is None else lost.status or 0
        await self._record(
            ApiCall(
                method=method, body=body, ok=bool(answer.get("ok")), error=answer.get("error"), status=status
            )
        )
        if lost is not None:
            if lost.status is None:
                assert request.transport is not None
                request.transport.abort()  # carried out, but the answer never comes back
                return web.Response()
            return web.json_response({"ok": False, "error": "fatal_error"}, status=lost.status)
        if method == "auth.test" and self.scopes is not None:
            return web.json_response(answer, headers={"x-oauth-scopes": ",".join(self.scopes)})
        return web.json_response(answer)

    def _lost(self, method: str, body: dict[str, Any]) -> LostAnswer | None:
        """The lost answer set for this call (`drop_response_once`), taken once."""
        lost = self._lose_next.get(method)
        if lost is None or not lost.when(body):
            return None
        del self._lose_next[method]
        return lost

    def _next_ts(self) -> str:
        return f"1700000000.{next(self._ts):06d}"

    def _answer(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://nerve-test.slack.com/",
                "team": "Nerve Test",
                "user": "nerve",
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "bot_id": BOT_ID,
                "is_enterprise_install": False,
            }
        if method == "chat.postMessage":
            ts = self._next_ts()
            thread = body.get("thread_ts")
            self.posted.append(
                Posted(
                    channel=str(body["channel"]),
                    ts=ts,
                    thread_ts=str(thread) if thread else None,
                    versions=[body],
                )
            )
            return {
                "ok": True,
                "channel": body["channel"],
                "ts": ts,
                "message": {"text": body.get("text", "")},
            }
        if method == "chat.update":
            for posted in self.posted:
                if posted.channel == body.get("channel") and posted.ts == body.get("ts"):
                    if posted.streaming:
                        return {"ok": False, "error": "cant_update_message"}
                    posted.versions.append(body)
                    return {
                        "ok": True,
                        "channel": posted.channel,
                        "ts": posted.ts,
                        "text": body.get("text", ""),
                    }
            return {"ok": False, "error": "message_not_found"}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": self._next_ts()}
        if method in ("assistant.threads.setStatus", "assistant.threads.setSuggestedPrompts"):
            return {"ok": True}
        if method in ("reactions.add", "reactions.remove"):
            return self._react(method, body)
        if method == "files.getUploadURLExternal":
            file_id = f"F{uuid.uuid4().hex[:10].upper()}"
            self._upload_names[file_id] = {"filename": body.get("filename"), "alt_txt": body.get("alt_txt")}
            return {"ok": True, "upload_url": f"{self.base}/upload/{file_id}", "file_id": file_id}
        if method == "files.completeUploadExternal":
            files = body.get("files") or []
            for f in files:
                named = self._upload_names.get(str(f.get("id")), {})
                self.shared.append(
                    SharedFile(
                        id=str(f.get("id")),
                        filename=str(named.get("filename") or ""),
                        title=f.get("title"),
                        alt_txt=named.get("alt_txt"),
                        channel=body.get("channel_id"),
                        thread_ts=body.get("thread_ts"),
                        data=self.uploads.get(str(f.get("id")), b""),
                    )
                )
            return {"ok": True, "files": [{"id": f.get("id"), "title": f.get("title")} for f in files]}
        if method in ("views.open", "views.update"):
            return self._view(method, body)
        if method in ("conversations.replies", "conversations.history"):
            return self._read(method, body)
        if method == "apps.connections.open":
            return {"ok": True, "url": f"ws://127.0.0.1:{self._port}/socket"}
        if method == "users.info":
            user = str(body.get("user") or "")
            if user not in self.zones:
                return {"ok": False, "error": "user_not_found"}
            return {"ok": True, "user": {"id": user, "tz": self.zones[user], "tz_offset": 0}}
        return {"ok": False, "error": "unknown_method"}

    def _read(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """The bot's messages in a thread (conversations.replies) or at the top level of a channel
        (conversations.history), oldest first as Slack pages replies, with their metadata only when
        `include_all_metadata` is set; `limit` and `cursor` page through them."""
        channel = str(body.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if method == "conversations.replies":
            root = str(body.get("ts") or "")
            if not root:
                return {"ok": False, "error": "thread_not_found"}
            mine = [p for p in self.posted if p.channel == channel and p.thread_ts == root]
        else:
            oldest = float(body.get("oldest") or 0)
            mine = [
                p for p in self.posted if p.channel == channel and not p.thread_ts and float(p.ts) > oldest
            ]
        mine.sort(key=lambda p: float(p.ts))
        with_metadata = str(body.get("include_all_metadata", "")).lower() in ("1", "true")
        messages = []
        for posted in mine:
            message: dict[str, Any] = {
                "type": "message",
                "ts": posted.ts,
                "text": posted.text,
                "bot_id": BOT_ID,
            }
            metadata = posted.versions[0].get("metadata")
            if with_metadata and isinstance(metadata, dict):
                message["metadata"] = metadata
            messages.append(message)
        start = int(body.get("cursor") or 0)
        limit = int(body.get("limit") or 100)
        page = messages[start : start + limit]
        more = start + limit < len(messages)
        return {
            "ok": True,
            "messages": page,
            "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }

    def _react(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        channel, ts, name = body.get("channel"), body.get("timestamp"), body.get("name")
        if not channel or not ts or not name:
            return {"ok": False, "error": "invalid_arguments"}
        names = self.reactions.setdefault((str(channel), str(ts)), set())
        if method == "reactions.add":
            if name in names:
                return {"ok": False, "error": "already_reacted"}
            names.add(str(name))
        else:
            if name not in names:
                return {"ok": False, "error": "no_reaction"}
            names.discard(str(name))
        return {"ok": True}

    def _view(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """views.open (with a fresh trigger id) and views.update (by view id), checked as Slack does."""
        view = body.get("view")
        if method == "views.open":
            trigger_id = str(body.get("trigger_id") or "")
            expiry = self._triggers.pop(trigger_id, None)
            if not trigger_id or expiry is None:
                return {"ok": False, "error": "invalid_trigger_id"}
            if time.monotonic() > expiry:
                return {"ok": False, "error": "expired_trigger_id"}
        else:
            found = [v for v in self.views if v.id == body.get("view_id")]
            if not found:
                return {"ok": False, "error": "not_found"}
        problems = view_problems(view)
        if problems:
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": problems}}
        assert isinstance(view, dict)
        if method == "views.open":
            opened = OpenView(id=f"V{next(self._view_ids):08d}", trigger_id=trigger_id, versions=[view])
            self.views.append(opened)
        else:
            opened = found[0]
            opened.versions.append(view)
        shown = {**view, "id": opened.id, "team_id": TEAM_ID, "state": {"values": {}}, "hash": opened.id}
        return {"ok": True, "view": shown}

    def _stream(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        """chat.startStream / appendStream / stopStream, checked as Slack checks them."""
        if not self.streaming:
            return {"ok": False, "error": self.streaming_error}
        channel = str(body.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        text = body.get("markdown_text")
        if text is not None and (not isinstance(text, str) or len(text) > STREAM_TEXT_LIMIT):
            return {"ok": False, "error": "msg_too_long"}
        chunks = body.get("chunks")
        if chunks is not None and (problem := _chunk_problem(chunks)) is not None:
            return {"ok": False, "error": problem}
        if method == "chat.startStream":
            if not body.get("thread_ts"):
                return {"ok": False, "error": "invalid_arguments"}
            if not channel.startswith("D"):
                if not body.get("recipient_team_id"):
                    return {"ok": False, "error": "missing_recipient_team_id"}
                if not body.get("recipient_user_id"):
                    return {"ok": False, "error": "missing_recipient_user_id"}
            posted = Posted(
                channel=channel, ts=self._next_ts(), thread_ts=str(body["thread_ts"]), streaming=True
            )
            posted.versions.append({"text": "", "tasks": {}, "blocks": []})
            self.posted.append(posted)
        else:
            found = [p for p in self.posted if p.channel == channel and p.ts == body.get("ts")]
            if not found or found[0].streaming is None:
                return {"ok": False, "error": "message_not_found"}
            posted = found[0]
            if not posted.streaming:
                return {"ok": False, "error": "message_not_in_streaming_state"}
            if method == "chat.appendStream" and not text and not chunks:
                return {"ok": False, "error": "invalid_arguments"}
            blocks = body.get("blocks") or []
            if method == "chat.stopStream" and _block_types(blocks) & self.refuse_block_types:
                return {"ok": False, "error": "invalid_blocks"}
        version = json.loads(json.dumps(posted.current))
        version["text"] += text or ""
        for chunk in chunks or []:
            if chunk["type"] == "markdown_text":
                version["text"] += chunk["text"]
            elif chunk["type"] == "task_update":
                version["tasks"][chunk["id"]] = {k: v for k, v in chunk.items() if k != "type"}
        if method == "chat.stopStream":
            version["blocks"] = body.get("blocks") or []
            posted.streaming = False
        version["call"] = method
        posted.versions.append(version)
        return {"ok": True, "channel": channel, "ts": posted.ts}

    async def _upload(self, request: web.Request) -> web.Response:
        if self.fail_uploads > 0:
            self.fail_uploads -= 1
            await request.read()
            return web.Response(status=400, text="upload refused")
        self.uploads[request.match_info["file_id"]] = await request.read()
        async with self._changed:
            self._changed.notify_all()
        return web.Response(text=f"OK - {len(self.uploads[request.match_info['file_id']])}")

    async def _record(self, call: ApiCall) -> None:
        self.calls.append(call)
        async with self._changed:
            self._changed.notify_all()

    # --- Socket Mode -------------------------------------------------------------------------

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        if self.out:
            return web.Response(status=503, text="Service Unavailable")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": "fake-slack", "approximate_connection_time": 3600},
                "connection_info": {"app_id": APP_ID},
            }
        )
        self._socket_open.set()
        async with self._changed:
            self._changed.notify_all()
        async for message in ws:
            if message.type == WSMsgType.TEXT:
                self.acks.append(json.loads(message.data))
                async with self._changed:
                    self._changed.notify_all()
        self._sockets.remove(ws)
        return ws

    @property
    def connections(self) -> int:
        """Socket Mode connections open now (each nerve process opens its own)."""
        return len(self._sockets)

    async def send_envelope(
        self, payload: dict[str, Any], *, kind: str = "events_api", retry: int = 0, to: int = -1
    ) -> str:
        """Deliver `payload` over an open Socket Mode connection (the latest, or the `to`-th as they
        opened: Slack spreads events and their retries over an app's connections); returns the
        envelope id to expect back."""
        async with asyncio.timeout(10):
            await self._socket_open.wait()
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry,
            "retry_reason": "timeout" if retry else "",
        }
        await self._sockets[to].send_json(envelope)
        return envelope_id
