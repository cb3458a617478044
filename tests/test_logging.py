"""Structured logs and traces: a real `nerve chat` and `nerve ask` against the fake model and a real MCP
server, its log read back line by line, its spans received by a local OTLP/HTTP collector."""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import logging
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from adapters.log_format import dress, settings_secrets
from adapters.settings import Settings
from adapters.terminal.views import conversation_key
from bot.agent import Agent
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.model.client import OpenAILLM
from bot.observe import tracing
from bot.observe.log_context import current_turn, fields, server_context, turn_context
from bot.store.sqlite import SQLiteStore
from bot.types import ConversationKey, Incoming
from tests.answering import decide
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, HttpError, reply, tool_reply
from tests.test_cli import nerve_env, run_nerve, servers_file, shipped_servers

# Shaped like the real thing, valid nowhere.
SLACK_TOKEN = "xoxb-1111111111-2222222222-FakeTokenForLogTests"
OTHER_KEY = "sk-proj-FakeKeyForLogTests0123456789"
DISCORD_TOKEN = "MTAxMTExMTExMTExMTExMTExMQ.GaBcDe.FakeDiscordTokenForLogTests012"
BEARER = "Bearer FakeBearerForLogTests42"
# nerve's own key: not shaped like any known key, so only knowing it can hide it.
API_KEY = "local-gateway-key-7f3a9c1e"
SECRETS = (SLACK_TOKEN, OTHER_KEY, DISCORD_TOKEN, "FakeBearerForLogTests42", API_KEY)

TESTKIT = {
    "command": sys.executable,
    "args": ["-m", "tests.mcp_servers.testkit"],
    "cwd": str(ROOT),
    "trustAnnotations": True,
}
THREAD = "logs"
KEY = ConversationKey(platform="slack", workspace="T1", channel="C1", thread="1700000000.000100")


def provider_error() -> HttpError:
    """A 503 whose message quotes credentials, as some gateways do; retried at once."""
    return HttpError(
        status=503,
        message=f"upstream refused key {OTHER_KEY} and token {SLACK_TOKEN}",
        headers={"Retry-After": "0"},
    )


# ------------------------------------------------------------------------------- the OTLP collector


@dataclass(frozen=True, slots=True)
class Span:
    name: str
    trace_id: bytes
    span_id: bytes
    parent_id: bytes
    attributes: dict[str, str]


class OtlpReceiver:
    """A collector on 127.0.0.1 that keeps every span POSTed to /v1/traces (OTLP/HTTP, protobuf)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._runner: web.AppRunner | None = None
        self.endpoint = ""

    async def __aenter__(self) -> OtlpReceiver:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.endpoint = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest.FromString(body)
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {a.key: a.value.string_value for a in span.attributes}
                    self.spans.append(
                        Span(span.name, span.trace_id, span.span_id, span.parent_span_id, attributes)
                    )
        return web.Response(
            body=ExportTraceServiceResponse().SerializeToString(), content_type="application/x-protobuf"
        )


# ------------------------------------------------------------------ one chat, two turns, read back


@dataclass(frozen=True, slots=True)
class ChatRun:
    lines: list[str]
    spans: list[Span]
    code: int
    err: str


@pytest.fixture(scope="module")
async def chat_run(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ChatRun]:
    """`nerve chat` answers two messages: the first after a provider error and a tool call, the
    second at once; JSON log in a file at DEBUG, spans to the local collector."""
    tmp_path = tmp_path_factory.mktemp("chat")
    script = [
        provider_error(),
        tool_reply(FakeCall(name="echo", arguments='{"text": "ping"}', id="call_echo")),
        reply("The echo said ping."),
        reply("Second answer."),
    ]
    log_file = tmp_path / "nerve.log"
    async with OtlpReceiver() as collector, FakeLLMServer(script) as model:
        env = nerve_env(
            tmp_path,
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY=API_KEY,
            NERVE_MODEL="test-model",
            NERVE_MCP_CONFIG=str(servers_file(tmp_path, {"testkit": TESTKIT})),
            NERVE_LOG_FORMAT="json",
            NERVE_LOG_LEVEL="DEBUG",
            NERVE_LOG_FILE=str(log_file),
            OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint,
        )
        code, _, err = await run_nerve(
            "chat", "--thread", THREAD, env=env, stdin="Echo ping, please.\nAnd now?\n"
        )
        model.assert_complete()
        # The SDK sends what is left when the process exits, and waits for the answer: all is here.
        spans = list(collector.spans)
    yield ChatRun(log_file.read_text(encoding="utf-8").splitlines(), spans, code, err)


def records(run: ChatRun) -> list[dict[str, Any]]:
    return [json.loads(line) for line in run.lines]


def test_every_line_of_the_log_is_one_json_object_with_the_fields(chat_run: ChatRun) -> None:
    assert chat_run.code == 0, chat_run.err
    assert len(chat_run.lines) > 10
    for entry in records(chat_run):
        assert {"time", "level", "logger", "message"} <= set(entry), entry
        assert entry["time"].endswith("+00:00") and "T" in entry["time"]
        assert set(entry) <= {
            "time", "level", "logger", "message", "event", "server", "conversation", "turn", "exc"
        }  # fmt: skip


def test_what_runs_for_a_server_names_it_also_in_the_sdks_own_lines(chat_run: ChatRun) -> None:
    entries = records(chat_run)
    ready = [e for e in entries if e["message"].startswith("MCP server 'testkit' ready in")]
    assert ready and all(e.get("server") == "testkit" for e in ready), ready
    # The SDK's client logs each message it receives from the server, inside that connection.
    sdk = [e for e in entries if e["logger"].startswith("mcp.") and "server" in e]
    assert sdk and {e["server"] for e in sdk} == {"testkit"}, [e["message"] for e in sdk][:5]
    # A line written in a turn names the turn, never a server it merely called.
    assert all("server" not in e for e in entries if "HTTP Request" in e["message"])


def test_the_lines_of_a_turn_carry_its_id_and_the_conversation_and_the_next_turn_has_another(
    chat_run: ChatRun,
) -> None:
    entries = records(chat_run)
    key = str(conversation_key(THREAD))
    in_turns = [e for e in entries if "turn" in e]
    assert all(e["conversation"] == key for e in in_turns)
    # Lines from before the first message (servers starting) belong to no turn.
    ready = [e for e in entries if "ready in" in e["message"]]
    assert ready and all("turn" not in e and "conversation" not in e for e in ready)
    # Each request to the model is logged by the HTTP client inside the turn that made it: three
    # for the first message (the refused one, the tool call, the answer), one for the second.
    posts = [e for e in entries if "POST" in e["message"] and "chat/completions" in e["message"]]
    posts = [e for e in posts if "HTTP Request" in e["message"]]
    assert len(posts) == 4, [e["message"] for e in posts]
    first, second = posts[0]["turn"], posts[3]["turn"]
    assert [e["turn"] for e in posts] == [first, first, first, second]
    assert first != second and len(first) == 8
    retry = next(e for e in entries if e["message"].startswith("model call failed"))
    assert retry["turn"] == first
    assert {e["turn"] for e in in_turns} == {first, second}


def test_no_token_or_key_reaches_the_log(chat_run: ChatRun) -> None:
    text = "\n".join(chat_run.lines)
    for secret in SECRETS:
        assert secret not in text
    retry = next(e for e in records(chat_run) if e["message"].startswith("model call failed"))
    assert "upstream refused key [hidden] and token [hidden]" in retry["message"]


def test_the_collector_receives_a_span_per_turn_model_request_and_tool_call(chat_run: ChatRun) -> None:
    spans = chat_run.spans
    turns = [s for s in spans if s.name == "nerve.turn"]
    models = [s for s in spans if s.name == "chat test-model"]
    tools = [s for s in spans if s.name == "execute_tool echo"]
    assert len(turns) == 2 and len(models) == 4 and len(tools) == 1, [s.name for s in spans]
    key = str(conversation_key(THREAD))
    entries = records(chat_run)
    logged_turns = [e["turn"] for e in entries if "turn" in e]
    first, second = logged_turns[0], logged_turns[-1]
    # The spans name the same turns as the log lines.
    assert {s.attributes["nerve.turn"] for s in turns} == {first, second}
    by_turn = {s.attributes["nerve.turn"]: s for s in turns}
    for span in [*models, *tools]:
        assert span.attributes["nerve.conversation"] == key
        parent = by_turn[span.attributes["nerve.turn"]]
        assert span.trace_id == parent.trace_id and span.parent_id == parent.span_id
    assert [s.attributes["nerve.turn"] for s in models].count(first) == 3
    assert tools[0].attributes["nerve.turn"] == first
    assert tools[0].attributes["gen_ai.tool.name"] == "echo"
    assert tools[0].attributes["gen_ai.tool.call.id"] == "call_echo"
    assert models[0].attributes["gen_ai.request.model"] == "test-model"


# -------------------------------------------------------------------------------- the text format


async def test_the_text_format_marks_the_lines_of_a_turn_and_hides_secrets(tmp_path: Path) -> None:
    script = [provider_error(), reply("Fine.")]
    async with FakeLLMServer(script) as model:
        env = nerve_env(
            tmp_path,
            OPENAI_BASE_URL=model.base_url,
            OPENAI_API_KEY=API_KEY,
            NERVE_MODEL="test-model",
            NERVE_MCP_CONFIG=str(servers_file(tmp_path, {"testkit": TESTKIT})),
            NERVE_LOG_LEVEL="INFO",
        )
        code, out, err = await run_nerve("ask", "Hello?", env=env)
    assert code == 0, err
    assert out.strip() == "Fine."
    lines = [line for line in err.splitlines() if line[:4].isdigit()]
    retry = next(line for line in lines if "model call failed" in line)
    assert "upstream refused key [hidden] and token [hidden]" in retry
    turn = retry.rsplit("[turn=", 1)[1].rstrip("]")
    assert len(turn) == 8 and retry.endswith(f" [turn={turn}]")
    ready = [line for line in lines if "ready in" in line]
    assert ready and not any("[turn=" in line for line in ready)
    for secret in SECRETS:
        assert secret not in err


# ------------------------------------------------------------------------------- a resumed turn


async def test_a_turn_resumed_after_approval_logs_under_an_id_of_its_own(tmp_path: Path, store: SQLiteStore):
    notes = tmp_path / "notes.txt"
    notes.write_text("first line\n", encoding="utf-8")
    server = ServerConfig(
        trustAnnotations=True,
        command=sys.executable,
        args=["-m", "tests.mcp_servers.trust", str(notes)],
        cwd=str(ROOT),
    )
    script = [
        provider_error(),
        tool_reply(FakeCall(name="append_note", arguments='{"text": "hi"}', id="c_add")),
        provider_error(),
        reply("Added it."),
    ]
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    dress(handler, "json")
    watched = logging.getLogger("bot.model.client")
    watched.addHandler(handler)
    try:
        async with FakeLLMServer(script) as model, MCPHost({"notes": server}, default_timeout=10.0) as host:
            llm = OpenAILLM(
                model="test-model", base_url=model.base_url, api_key=None, timeout=10, max_retries=2
            )
            agent = Agent(llm=llm, host=host, store=store, inbox=store, approvals=store)
            parked = await agent.reply(Incoming(key=KEY, text="add hi to the note", user_id="U1"))
            assert parked.approval is not None
            await decide(agent, parked.approval.request_id, "U1", approve=True)
            resumed = await agent.resume(parked.approval.request_id)
            await llm.aclose()
    finally:
        watched.removeHandler(handler)
    assert resumed is not None and resumed.text == "Added it."
    retries = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert [e["message"][:17] for e in retries] == ["model call failed"] * 2
    assert {e["conversation"] for e in retries} == {str(KEY)}
    assert retries[0]["turn"] != retries[1]["turn"], "the resumed turn has an id of its own"


# ---------------------------------------------------------------- formatting and redaction, in-process


def logger_to(buffer: io.StringIO, log_format: str, secrets: tuple[str, ...] = ()) -> logging.Logger:
    handler = logging.StreamHandler(buffer)
    dress(handler, log_format, secrets)  # type: ignore[arg-type]
    logger = logging.getLogger(f"tests.logging.{log_format}.{id(buffer)}")
    logger.handlers = [handler]
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    return logger


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_secrets_are_hidden_in_messages_arguments_and_tracebacks(log_format: str) -> None:
    buffer = io.StringIO()
    logger = logger_to(buffer, log_format, secrets=(API_KEY,))
    logger.warning("headers: Authorization: %s, slack %s", BEARER, SLACK_TOKEN)
    logger.info("discord %s openai %s ours %s", DISCORD_TOKEN, OTHER_KEY, API_KEY)
    try:
        raise RuntimeError(f"connect failed with {OTHER_KEY} / {DISCORD_TOKEN} / {API_KEY}")
    except RuntimeError:
        logger.exception("the call failed for %s", SLACK_TOKEN)
    written = buffer.getvalue()
    for secret in SECRETS:
        assert secret not in written
    assert "Authorization: Bearer [hidden], slack [hidden]" in written
    assert "discord [hidden] openai [hidden] ours [hidden]" in written
    assert "RuntimeError: connect failed with [hidden] / [hidden] / [hidden]" in written


def test_a_line_an_operator_acts_on_carries_its_event_and_server() -> None:
    buffer = io.StringIO()
    logger = logger_to(buffer, "json")
    logger.warning("MCP server %r restarted", "raw", extra=fields("mcp.server_restarted", server="raw"))
    with turn_context(KEY) as turn:
        logger.info("plain")
    first, second = (json.loads(line) for line in buffer.getvalue().splitlines())
    assert (first["event"], first["server"]) == ("mcp.server_restarted", "raw")
    assert "turn" not in first
    assert "event" not in second and "server" not in second and second["turn"] == turn.id


async def test_a_task_started_in_a_servers_context_names_it_and_others_do_not() -> None:
    buffer = io.StringIO()
    logger = logger_to(buffer, "json")

    async def connection() -> None:
        logger.info("inside")
        await asyncio.create_task(asyncio.sleep(0))  # a task it starts inherits the server
        logger.info("still inside")

    await asyncio.create_task(connection(), context=server_context("notes"))
    logger.info("outside")
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    assert [e.get("server") for e in lines] == ["notes", "notes", None]


def test_a_json_line_holds_the_traceback_as_one_string_and_the_turn() -> None:
    buffer = io.StringIO()
    logger = logger_to(buffer, "json")
    with turn_context(KEY) as turn:
        try:
            {}["missing"]
        except KeyError:
            logger.exception("lookup failed\non two lines")
    logger.info("after the turn")
    first, second = (json.loads(line) for line in buffer.getvalue().splitlines())
    assert first["message"] == "lookup failed\non two lines"
    assert first["exc"].startswith("Traceback (most recent call last):")
    assert first["exc"].rstrip().endswith("KeyError: 'missing'")
    assert first["conversation"] == "slack:T1:C1:1700000000.000100" and first["turn"] == turn.id
    assert first["level"] == "ERROR" and first["logger"] == logger.name
    assert "turn" not in second and "conversation" not in second and "exc" not in second


async def test_concurrent_turns_each_see_their_own_id_also_in_the_tasks_they_start() -> None:
    seen: dict[str, set[str | None]] = {}

    async def turn(thread: str) -> None:
        key = ConversationKey(platform="terminal", workspace="u", channel="cli", thread=thread)
        with turn_context(key):
            here = current_turn()
            assert here is not None

            async def call() -> str | None:
                await asyncio.sleep(0)
                inner = current_turn()
                return inner.id if inner else None

            ids = await asyncio.gather(call(), call())
            seen[thread] = {here.id, *ids}

    await asyncio.gather(turn("a"), turn("b"))
    assert current_turn() is None
    assert len(seen["a"]) == 1 and len(seen["b"]) == 1 and seen["a"] != seen["b"]


# ------------------------------------------------------------------------------- tracing switched off


async def test_without_a_collector_the_span_functions_only_run_what_they_wrap() -> None:
    assert tracing.start(None) is False
    ran = []
    with turn_context(KEY), tracing.turn_span():
        with tracing.model_span("m"):
            ran.append("model")
        with pytest.raises(ValueError, match="kept"), tracing.tool_span("t", "call_1"):
            raise ValueError("kept")
    assert ran == ["model"]


def test_a_collector_without_the_extra_is_one_warning_saying_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The SDK cannot be imported, as in an install without the extra.
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk", None)
    monkeypatch.setattr(tracing, "_tracer", None)
    with caplog.at_level(logging.WARNING, logger="bot.observe.tracing"):
        assert tracing.start("http://127.0.0.1:4318") is False
    assert [r.getMessage() for r in caplog.records] == [tracing.INSTALL_HINT]
    assert "pip install 'nerve[otel]'" in tracing.INSTALL_HINT
    with tracing.turn_span():
        pass


async def test_nerve_says_once_at_start_how_to_install_the_extra(tmp_path: Path) -> None:
    # `nerve ask` in an interpreter where the SDK cannot be imported.
    blocked = (
        "import sys; sys.modules['opentelemetry.sdk'] = None; from adapters.cli import main; sys.exit(main())"
    )
    env = nerve_env(
        tmp_path, servers=shipped_servers("env-query"), OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9"
    )
    code, out, err = await run_nerve(
        "ask", "How is the air in A1001?", env=env, command=(sys.executable, "-c", blocked)
    )
    assert code == 0, err
    assert "AQI" in out
    assert err.count("pip install 'nerve[otel]'") == 1


def test_hiding_secrets_leaves_the_record_alone_for_the_other_handlers() -> None:
    """Dressing the root's handlers must not change what other handlers (a test's log capture, a
    library's own handler) read from the same record."""
    buffer = io.StringIO()
    logger = logger_to(buffer, "text")
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger.addHandler(Keep())
    logger.warning("server %r says %s", "flaky", SLACK_TOKEN)
    assert SLACK_TOKEN not in buffer.getvalue() and "[hidden]" in buffer.getvalue()
    [record] = seen
    assert record.args == ("flaky", SLACK_TOKEN) and record.msg == "server %r says %s"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_key_named_by_the_servers_files_models_never_appears_in_a_log_line(
    log_format: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "plainkey0123456789abcdef"  # no token shape: only knowing the key hides it
    monkeypatch.setenv("BACKUP_MODEL_KEY", key)
    servers = tmp_path / "mcp.json"
    listed = [
        {"name": "main", "model": "m"},
        {"name": "backup", "model": "b", "api_key_env": "BACKUP_MODEL_KEY"},
    ]
    servers.write_text(json.dumps({"mcpServers": {}, "models": listed}), encoding="utf-8")
    settings = Settings(_env_file=None, nerve_mcp_config=servers)  # type: ignore[call-arg]
    buffer = io.StringIO()
    logger = logger_to(buffer, log_format, secrets=tuple(settings_secrets(settings)))
    logger.warning("request to backup failed: Authorization %s", key)
    try:
        raise RuntimeError(f"refused key {key}")
    except RuntimeError:
        logger.exception("model call failed")
    assert key not in buffer.getvalue() and "[hidden]" in buffer.getvalue()
