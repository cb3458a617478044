"""/healthz, /readyz and /metrics on the real front ends: `run_slack` (Socket Mode and HTTP) and
`run_discord` against the fakes, the real agent and store, the real `openai` client against the fake
model service, and a real MCP server as a subprocess. Figures are read back the way Prometheus reads
them: the text of /metrics, parsed with prometheus-client's own parser.

The tests of one front end with no MCP server ready come first: readiness counts every server this
process runs, and the shared server of the later tests is started only when they need it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapters.discord.app import RestartPolicy, run_discord
from adapters.ops_http import chat_ops
from adapters.settings import Settings
from adapters.slack.serve import EVENTS_PATH, run_slack
from bot.agent import Agent
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.model.client import OpenAILLM
from bot.observe import metrics
from bot.store.sqlite import SQLiteStore
from bot.types import ConversationKey, Incoming, InputAnswer, InputRequest, TurnEvent
from tests.answering import decide
from tests.conftest import stdio_server
from tests.fakes.answering import answer_question
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.discord_api import settings_for as discord_settings
from tests.fakes.llm_server import FakeLLMServer, Step, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.test_slack_harness import WatchedInbox, mention
from tests.test_slack_harness import settings_for as slack_settings

API_KEY = "sk-ops-test-key-0123456789"
APP_TOKEN = "xapp-1-ops-test-app-token"
ASK = [
    tool_reply(("get_environment_status", '{"area_code": "A1001"}')),
    reply("The air in A1001 is fine."),
]


@pytest.fixture(scope="module")
async def env_host() -> AsyncIterator[MCPHost]:
    """The example env-query server, a real subprocess, shared by the tests that need one ready."""
    host = MCPHost({"env-query": stdio_server("servers.env_query")}, default_timeout=15.0)
    await host.start()
    try:
        async with asyncio.timeout(15):
            await host.wait_until_ready()
        yield host
    finally:
        await host.aclose()


@pytest.fixture
def figures() -> metrics.Metrics:
    """This test's own run of figures."""
    return metrics.reset()


@dataclass
class Core:
    agent: Agent
    store: SQLiteStore
    inbox: WatchedInbox
    llm: FakeLLMServer


@contextlib.asynccontextmanager
async def core(tmp_path: Path, host: Any, script: Sequence[Step]) -> AsyncIterator[Core]:
    """The real agent on a real store (its inbox watched, to know when a delivery was answered)."""
    async with FakeLLMServer(script) as llm:
        store = await SQLiteStore.open(tmp_path / "nerve.db")
        model = OpenAILLM(model="fake", base_url=llm.base_url, api_key=API_KEY, timeout=20, max_retries=0)
        inbox = WatchedInbox(store)
        agent = Agent(llm=model, host=host, store=store, inbox=inbox, approvals=store, inputs=store)
        try:
            yield Core(agent=agent, store=store, inbox=inbox, llm=llm)
        finally:
            await model.aclose()
            await store.close()


@contextlib.asynccontextmanager
async def front_end(run: Coroutine[Any, Any, None], ops_ready: asyncio.Future[str]) -> AsyncIterator[str]:
    """A front end's runner as a task until the block ends; yields the base URL of its endpoints."""
    task = asyncio.create_task(run)
    try:
        async with asyncio.timeout(15):
            done, _ = await asyncio.wait([task, ops_ready], return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
        if task in done:
            task.result()
            raise AssertionError("the front end stopped before serving its endpoints")
        yield ops_ready.result()
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.text()


async def readiness(base: str) -> tuple[int, list[str]]:
    status, body = await get(f"{base}/readyz")
    answer = json.loads(body)
    assert answer["ready"] is (status == 200)
    return status, answer["reasons"]


async def ready_within(base: str, seconds: float = 15.0) -> None:
    """Probe /readyz the way an orchestrator does, until it answers 200 (bounded)."""
    async with asyncio.timeout(seconds):
        # Polled on purpose: nothing announces readiness, an orchestrator asks again until it is.
        while (await readiness(base))[0] != 200:  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def sample(text: str, name: str, **labels: str) -> float | None:
    """One sample of a /metrics text, read with prometheus-client's parser (None when absent)."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def missing_server() -> dict[str, ServerConfig]:
    return {"missing": ServerConfig(command="/nonexistent/nerve-ops-test-server")}


# --- no MCP server ready --------------------------------------------------------------------------


async def test_readyz_is_503_while_no_mcp_server_is_ready_and_names_the_database_when_it_fails(
    tmp_path: Path, figures: metrics.Metrics
) -> None:
    async with MCPHost(missing_server()) as host, core(tmp_path, host, []) as c, FakeSlack() as slack:
        settings = slack_settings(slack)  # HTTP mode: the endpoints share the events app
        ops_ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        run = run_slack(c.agent, settings, host="127.0.0.1", ops_ready=ops_ready)
        async with front_end(run, ops_ready) as base:
            assert (await get(f"{base}/healthz"))[0] == 200
            assert await readiness(base) == (503, ["no MCP server is ready (missing down)"])
            await c.store.close()
            assert await readiness(base) == (
                503,
                ["database unreachable: StoreError", "no MCP server is ready (missing down)"],
            )
            status, text = await get(f"{base}/metrics")
            assert status == 200
            assert sample(text, "nerve_mcp_server_up", server="missing") == 0.0


# --- Slack ----------------------------------------------------------------------------------------


async def test_slack_socket_mode_serves_the_endpoints_and_counts_a_turn_with_a_tool_call(
    tmp_path: Path, env_host: MCPHost, figures: metrics.Metrics
) -> None:
    async with core(tmp_path, env_host, ASK) as c, FakeSlack() as slack:
        # Slack asks nerve to slow down at start: the endpoints answer meanwhile, not ready yet.
        slack.rate_limit_once("auth.test", retry_after=1)
        settings = slack_settings(slack, slack_app_token=APP_TOKEN)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[str] = loop.create_future()
        ops_ready: asyncio.Future[str] = loop.create_future()
        run = run_slack(c.agent, settings, host="127.0.0.1", ready=ready, ops_ready=ops_ready)
        async with front_end(run, ops_ready) as base:
            assert (await get(f"{base}/healthz"))[0] == 200
            assert await readiness(base) == (503, ["not connected to Slack yet"])
            async with asyncio.timeout(15):
                assert await ready == "socket-mode"
            assert await readiness(base) == (200, [])

            body = mention(f"<@{BOT_USER_ID}> how is the air in A1001?", ts="1600000000.007000")
            await slack.send_envelope(body)
            await c.inbox.wait_finished(body["event_id"])
            status, text = await get(f"{base}/metrics")

        assert status == 200
        assert [p.text for p in slack.thread("C0CHANNEL", "1600000000.007000")] == [
            "The air in A1001 is fine."
        ]
        assert sample(text, "nerve_turns_total", surface="slack", outcome="answered") == 1
        assert sample(text, "nerve_turn_seconds_count", surface="slack") == 1
        assert sample(text, "nerve_model_requests_total", outcome="ok") == 2
        assert sample(text, "nerve_model_request_seconds_count") == 2
        prompt = sample(text, "nerve_model_tokens_total", kind="prompt")
        completion = sample(text, "nerve_model_tokens_total", kind="completion")
        assert prompt is not None and prompt > 0 and completion is not None and completion > 0
        tool = {"server": "env-query", "tool": "get_environment_status"}
        assert sample(text, "nerve_tool_calls_total", **tool, outcome="ok") == 1
        assert sample(text, "nerve_tool_call_seconds_count", **tool) == 1
        assert sample(text, "nerve_rate_limit_waits_total", platform="slack") == 1
        waited = sample(text, "nerve_rate_limit_wait_seconds_total", platform="slack")
        assert waited is not None and waited >= 1.0
        assert sample(text, "nerve_mcp_server_up", server="env-query") == 1.0
        assert sample(text, "nerve_turn_queue_depth") == 0
        assert (sample(text, "nerve_turn_limit") or 0) >= 1
        assert len(c.llm.requests) == 2


async def test_slack_over_http_serves_the_endpoints_on_the_events_port(
    tmp_path: Path, env_host: MCPHost, figures: metrics.Metrics
) -> None:
    async with core(tmp_path, env_host, []) as c, FakeSlack() as slack:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[str] = loop.create_future()
        ops_ready: asyncio.Future[str] = loop.create_future()
        run = run_slack(c.agent, slack_settings(slack), host="127.0.0.1", ready=ready, ops_ready=ops_ready)
        async with front_end(run, ops_ready) as base:
            assert await ready == f"{base}{EVENTS_PATH}"
            assert (await get(f"{base}/healthz"))[0] == 200
            assert await readiness(base) == (200, [])
            status, text = await get(f"{base}/metrics")
            assert status == 200 and sample(text, "nerve_mcp_server_up", server="env-query") == 1.0


async def test_no_token_key_or_secret_appears_on_the_endpoints(
    tmp_path: Path, env_host: MCPHost, figures: metrics.Metrics
) -> None:
    async with core(tmp_path, env_host, ASK) as c, FakeSlack() as slack:
        settings = slack_settings(slack, slack_app_token=APP_TOKEN, openai_api_key=API_KEY)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[str] = loop.create_future()
        ops_ready: asyncio.Future[str] = loop.create_future()
        run = run_slack(c.agent, settings, host="127.0.0.1", ready=ready, ops_ready=ops_ready)
        async with front_end(run, ops_ready) as base:
            async with asyncio.timeout(15):
                await ready
            body = mention(f"<@{BOT_USER_ID}> air in A1001?", ts="1600000000.007100")
            await slack.send_envelope(body)
            await c.inbox.wait_finished(body["event_id"])
            shown = [(await get(f"{base}{path}"))[1] for path in ("/metrics", "/readyz", "/healthz")]
        assert "nerve_turns_total" in shown[0]
        secrets = [
            APP_TOKEN,
            API_KEY,
            settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else "",
            settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else "",
        ]
        for secret in filter(None, secrets):
            for text in shown:
                assert secret not in text and secret[:12] not in text


# --- Discord ----------------------------------------------------------------------------------------


async def test_discord_serves_the_endpoints_and_counts_a_turn_with_a_tool_call(
    tmp_path: Path, env_host: MCPHost, figures: metrics.Metrics
) -> None:
    async with core(tmp_path, env_host, ASK) as c, FakeDiscord() as fake:
        # The first login fails: the endpoints answer while the bot waits to try again.
        fake.login_failures = 1
        ops_ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        policy = RestartPolicy(initial=0.5, maximum=0.5)
        run = run_discord(c.agent, discord_settings(fake), policy=policy, ops_ready=ops_ready)
        async with front_end(run, ops_ready) as base:
            assert (await get(f"{base}/healthz"))[0] == 200
            assert await readiness(base) == (503, ["not connected to Discord yet"])
            await ready_within(base)

            # Discord's rate limit on the answer's first post is waited out, and counted.
            fake.rate_limit_next("POST", r"/channels/\d+/messages", retry_after=0.05)
            message = await fake.user_dms(fake.user("olga"), "How is the air in A1001?")
            await c.inbox.wait_finished(f"m:{message['id']}")
            status, text = await get(f"{base}/metrics")

        assert status == 200
        assert any("is fine" in str(m.get("content")) for m in fake.bot_messages())
        assert sample(text, "nerve_turns_total", surface="discord", outcome="answered") == 1
        assert sample(text, "nerve_model_requests_total", outcome="ok") == 2
        assert (sample(text, "nerve_model_tokens_total", kind="completion") or 0) > 0
        tool = {"server": "env-query", "tool": "get_environment_status"}
        assert sample(text, "nerve_tool_calls_total", **tool, outcome="ok") == 1
        assert sample(text, "nerve_rate_limit_waits_total", platform="discord") == 1


# --- the terminal -----------------------------------------------------------------------------------


async def test_the_chat_serves_the_endpoints_only_when_the_port_is_set(
    tmp_path: Path, env_host: MCPHost, figures: metrics.Metrics
) -> None:
    async with core(tmp_path, env_host, []) as c:
        agent = c.agent
        unset = Settings(_env_file=None)  # type: ignore[call-arg]
        async with chat_ops(agent, unset) as url:
            assert url is None
        explicit = Settings(_env_file=None, nerve_http_host="127.0.0.1", nerve_http_port=0)  # type: ignore[call-arg]
        async with chat_ops(agent, explicit) as url:
            assert url is not None
            assert await readiness(url) == (200, [])
            # A port that is taken costs the chat a warning, not its start.
            taken = int(url.rsplit(":", 1)[1])
            clash = Settings(_env_file=None, nerve_http_host="127.0.0.1", nerve_http_port=taken)  # type: ignore[call-arg]
            async with chat_ops(agent, clash) as second:
                assert second is None


# --- people: approvals and questions ----------------------------------------------------------------


class Questions:
    """A progress sink that keeps the questions a turn shows."""

    def __init__(self) -> None:
        self.shown: list[InputRequest] = []

    async def __call__(self, event: TurnEvent) -> None:
        if event.kind == "ask" and event.ask is not None and event.ask.input is not None:
            self.shown.append(event.ask.input)


def figures_now() -> str:
    return metrics.exposition()[0].decode()


async def test_approvals_and_questions_are_counted_while_they_wait_and_when_they_end(
    tmp_path: Path, figures: metrics.Metrics
) -> None:
    servers = {
        "guarded": stdio_server("servers.env_query").model_copy(update={"approval": "always"}),
        "asks": stdio_server("tests.mcp_servers.asks"),
    }
    script = [
        tool_reply(("get_environment_status", '{"area_code": "A1001"}')),
        reply("Approved and fine."),
        tool_reply(("ask_colour", '{"label": "door"}')),
        reply("A red door."),
    ]
    async with MCPHost(servers) as host, core(tmp_path, host, script) as c:
        async with asyncio.timeout(15):
            await host.wait_until_ready()
        key = ConversationKey(platform="terminal", workspace="local", channel="ops", thread="t1")

        parked = await c.agent.reply(Incoming(key=key, text="air in A1001?", user_id="u1"))
        assert parked.approval is not None
        text = figures_now()
        assert sample(text, "nerve_turns_total", surface="terminal", outcome="parked") == 1
        assert sample(text, "nerve_approvals_waiting") == 1
        decision = await decide(c.agent, parked.approval.request_id, "u1", approve=True)
        assert decision.ready
        assert await c.agent.resume(parked.approval.request_id) is not None
        text = figures_now()
        assert sample(text, "nerve_approvals_waiting") == 0
        assert sample(text, "nerve_approval_decisions_total", outcome="approved") == 1
        assert sample(text, "nerve_turns_total", surface="terminal", outcome="answered") == 1

        questions = Questions()
        waiting = await c.agent.reply(Incoming(key=key, text="paint the door", user_id="u1"), questions)
        assert "Waiting for your answer" in waiting.text
        text = figures_now()
        assert sample(text, "nerve_turns_total", surface="terminal", outcome="parked") == 2
        assert sample(text, "nerve_questions_waiting") == 1
        [question] = questions.shown
        answer = InputAnswer(action="accept", content={"colour": question.form.fields[0].options[0][0]})  # type: ignore[union-attr]
        answered = await answer_question(c.agent, question.request_id, "u1", answer)
        assert answered.resume is not None
        assert await c.agent.resume(answered.resume) is not None
        text = figures_now()
        assert sample(text, "nerve_questions_waiting") == 0
        assert sample(text, "nerve_questions_total", outcome="accepted") == 1
        assert sample(text, "nerve_turns_total", surface="terminal", outcome="answered") == 2
        assert sample(text, "nerve_tool_calls_total", server="asks", tool="ask_colour", outcome="asked") == 1
        assert sample(text, "nerve_tool_calls_total", server="asks", tool="ask_colour", outcome="ok") == 1
