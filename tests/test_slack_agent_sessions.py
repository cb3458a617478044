"""The Agent messaging experience on Slack: each thread's agent session shows what its turn does
(processing → active; suspended while a parked turn waits for a person), the stop button cancels a
turn the way Ctrl-C does in the terminal, and the Messages tab gets the suggested prompts.

The real bolt app serves signed HTTP deliveries and talks to the Slack fake, which keeps the
sessions with Slack's documented arguments and limits (`tests.fakes.slack_sessions`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest
import yaml

from adapters.doctor.slack_check import experience
from adapters.settings import Settings
from adapters.slack.app import build_bot
from adapters.slack.client import make_client
from adapters.slack.serve import serve_http
from adapters.slack.sessions import TITLE_LIMIT, session_title, topic_title
from bot.mcp.host import MCPHost
from bot.types import CallContext, ConversationKey, ToolResult, ToolSpec
from tests.conftest import ROOT
from tests.fakes.llm_server import Reply, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID
from tests.fakes.slack_sessions import home_opened, stop_pressed
from tests.stores import Backend
from tests.test_mcp_faults import received, stubborn, until_received
from tests.test_slack_approvals import (  # noqa: F401  (fixtures)
    ADMIN,
    ALICE,
    BOB,
    CHANNEL,
    approval_messages,
    button,
    click_payload,
    host,
    notes,
    ran,
    read_and_add,
)
from tests.test_slack_harness import Rig, StaticHost, dm, event_body, mention, rig, settings_for, sign

pytestmark = pytest.mark.both_stores
TOOL = "slow_lookup"


def statuses(r: Rig, root: str, channel: str = CHANNEL) -> list[str]:
    return r.slack.sessions.statuses(channel, root)


async def test_a_turn_sets_processing_with_a_title_then_active_once_answered(
    tmp_path: Path, store_backend: Backend
) -> None:
    question = "What is the air quality in Oslo today? Also say which tools you used."
    async with rig(tmp_path, [reply("Good, mostly.")], backend=store_backend) as r:
        root = "1600000000.300100"
        await r.deliver(mention(f"<@{BOT_USER_ID}> {question}", ts=root))
        await r.settle()
        assert statuses(r, root) == ["processing", "active"]
        session = r.slack.sessions.sessions[(CHANNEL, root)]
        assert session.initiator == ALICE
        # Created with the question as its title, retitled to its topic once the first answer is out.
        assert session.titles == ["What is the air quality in Oslo today?"]
        [first, *_] = r.slack.calls_of("agents.sessions.setStatus")
        assert first.body["title"] == question and first.body["initiator_user_id"] == ALICE
        methods = [c.method for c in r.slack.calls if c.method != "auth.test"]
        assert methods.index("agents.sessions.setStatus") < methods.index("chat.postMessage")
        assert "assistant.threads.setStatus" not in methods
        assert r.slack.thread(CHANNEL, root)[-1].text == "Good, mostly."


def test_titles_keep_to_slacks_limit_and_one_line() -> None:
    long = "word " * 100
    assert len(session_title(long)) <= TITLE_LIMIT
    assert session_title("\n\n  first   line \nsecond") == "first line"
    assert session_title("") == "Conversation with nerve"
    assert topic_title("Why is the sky blue? Explain.") == "Why is the sky blue?"


async def test_a_turn_parked_on_an_approval_is_suspended_and_resumes_processing_in_another_app(
    tmp_path: Path,
    host: MCPHost,  # noqa: F811  (fixture)
    notes: Path,  # noqa: F811  (fixture)
    store_backend: Backend,
) -> None:
    script = [read_and_add(), reply("added hi")]
    async with rig(tmp_path, script, host=host, approvals=True, backend=store_backend) as r:
        root = "1600000000.300200"
        await r.deliver(mention(f"<@{BOT_USER_ID}> add hi to the note", ts=root))
        await r.settle()
        assert statuses(r, root) == ["processing", "suspended"]
        [approval] = approval_messages(r, root)

        # The click reaches another bolt app on the same database (another replica, a restart).
        cfg = settings_for(r.slack)
        other = build_bot(r.agent, cfg, client=make_client(cfg), pace=0, status_interval=0)
        runner, url = await serve_http(other, "127.0.0.1", 0)
        try:
            raw = urlencode(
                {"payload": json.dumps(click_payload(approval, button(approval, "approve", 0), ALICE))}
            )
            headers = {**sign(raw), "Content-Type": "application/x-www-form-urlencoded"}
            async with aiohttp.ClientSession() as http, http.post(url, data=raw, headers=headers) as answer:
                assert answer.status == 200
            async with asyncio.timeout(10):
                await other.idle()
        finally:
            await other.aclose()
            await runner.cleanup()
        assert ran(notes) == ["read_note", "append_note"]
        assert statuses(r, root) == ["processing", "suspended", "processing", "active"]
        assert r.slack.thread(CHANNEL, root)[-1].text == "added hi"


class StoppableHost(StaticHost):
    """A tool that runs until it is cancelled, and says when it started and whether it was cancelled."""

    def __init__(self) -> None:
        super().__init__({TOOL: lambda _args: ToolResult(content="never")})
        self.started = asyncio.Event()
        self.cancelled = False

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ToolResult(content="never")


async def test_stop_pressed_mid_answer_cancels_the_turn_keeps_the_message_and_says_stopped(
    tmp_path: Path, store_backend: Backend
) -> None:
    slow = StoppableHost()
    script: list[Reply] = [tool_reply((TOOL, "{}"))]
    async with rig(tmp_path, script, host=slow, backend=store_backend) as r:
        r.slack.streaming = True
        root = "1600000000.300300"
        await r.deliver(mention(f"<@{BOT_USER_ID}> look it up", ts=root))
        async with asyncio.timeout(10):
            await slow.started.wait()
        assert statuses(r, root) == ["processing"]
        streams = [p.ts for p in r.slack.streams()]
        assert await r.deliver(event_body(stop_pressed(ALICE, CHANNEL, root, streams)["event"])) == 200
        await r.settle()

        assert slow.cancelled, "the running call was cancelled"
        assert statuses(r, root) == ["processing", "active"]
        [live] = r.slack.thread(CHANNEL, root)
        assert "Stopped" in live.text
        key = ConversationKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=root)
        kept = [m.content for m in await r.store.history(key) if m.role == "user"]
        assert kept == ["look it up"], "the person's message stays stored"


async def test_stop_pressed_where_no_turn_runs_still_takes_the_session_out_of_processing(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with rig(tmp_path, [], backend=store_backend) as r:
        root = "1600000000.300400"
        await r.deliver(event_body(stop_pressed(ALICE, CHANNEL, root, [])["event"]))
        await r.settle()
        [call] = r.slack.calls_of("agents.sessions.setStatus")
        assert call.body["status"] == "active" and call.body["thread_ts"] == root


async def test_opening_the_messages_tab_suggests_prompts_for_the_channel_without_a_thread(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with rig(tmp_path, [], backend=store_backend) as r:
        assert await r.deliver(home_opened(ALICE, "D0ALICE", tab="messages")) == 200
        assert await r.deliver(home_opened(ALICE, "D0ALICE", tab="home")) == 200
        await r.settle()
        [prompts] = r.slack.calls_of("assistant.threads.setSuggestedPrompts")
        assert prompts.body["channel_id"] == "D0ALICE" and "thread_ts" not in prompts.body
        assert 1 <= len(prompts.body["prompts"]) <= 4


async def test_an_app_on_the_assistant_experience_sets_no_session(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with rig(tmp_path, [reply("hi there")], backend=store_backend, slack_experience="assistant") as r:
        await r.deliver(dm("hello", thread_ts="1600000000.300500"))
        await r.deliver(home_opened(ALICE, "D0ALICE"))
        await r.settle()
        assert r.slack.calls_of("agents.sessions.setStatus") == []
        assert r.slack.calls_of("assistant.threads.setSuggestedPrompts") == []
        assert [c.body["status"] for c in r.slack.calls_of("assistant.threads.setStatus")] == ["is thinking…"]


async def test_a_session_slack_refuses_never_fails_the_answer(tmp_path: Path, store_backend: Backend) -> None:
    async with rig(tmp_path, [reply("still answered")], backend=store_backend) as r:
        r.slack.sessions.agent = False  # the app was never declared an agent
        root = "1600000000.300600"
        await r.deliver(mention(f"<@{BOT_USER_ID}> hello", ts=root))
        await r.settle()
        assert {c.error for c in r.slack.calls_of("agents.sessions.setStatus")} == {"app_not_agent"}
        assert r.slack.thread(CHANNEL, root)[-1].text == "still answered"


def _manifest(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / "slack" / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("transport", ["socket", "http"])
def test_the_default_manifest_is_an_agent_and_the_assistant_variant_differs_only_in_its_view(
    transport: str,
) -> None:
    agent, assistant = (
        _manifest(f"manifest.{transport}.yaml"),
        _manifest(f"manifest.assistant.{transport}.yaml"),
    )
    assert agent["features"]["agent_view"]["agent_description"]
    assert "assistant_view" not in agent["features"]
    events = agent["settings"]["event_subscriptions"]["bot_events"]
    assert {"agent_session_stopped", "app_home_opened"} <= set(events)
    assert not any(event.startswith("assistant_thread") for event in events)
    scopes = set(agent["oauth_config"]["scopes"]["bot"])
    assert {"assistant:write", "chat:write"} <= scopes  # what agent sessions need
    # The Assistant variant is the same app with the assistant pane and its events.
    view = assistant["features"].pop("assistant_view")
    assert view["assistant_description"] == agent["features"].pop("agent_view")["agent_description"]
    old = assistant["settings"]["event_subscriptions"]["bot_events"]
    assert {"assistant_thread_started", "assistant_thread_context_changed"} <= set(old)
    for app in (agent, assistant):
        app["settings"]["event_subscriptions"]["bot_events"] = []
    assert agent == assistant


def test_the_doctor_tells_which_experience_the_app_is_made_for() -> None:
    default = experience(Settings(_env_file=None))  # type: ignore[call-arg]
    assert default.status == "ok" and "Agent messaging experience" in default.found
    said = experience(Settings(_env_file=None, slack_experience="assistant"))  # type: ignore[call-arg]
    assert said.status == "warning" and "manifest.assistant" in said.found


async def test_reset_in_a_thread_closes_its_session(tmp_path: Path, store_backend: Backend) -> None:
    async with rig(tmp_path, [reply("first answer")], backend=store_backend) as r:
        root = "1600000000.300700"
        await r.deliver(mention(f"<@{BOT_USER_ID}> hello", ts=root))
        await r.settle()
        await r.deliver(mention(f"<@{BOT_USER_ID}> reset", ts="1600000000.300701", thread_ts=root))
        await r.settle()
        assert statuses(r, root) == ["processing", "active", "closed"]


async def test_stop_sends_notifications_cancelled_to_the_mcp_server_of_the_running_call(
    tmp_path: Path,
) -> None:
    log = tmp_path / "received.jsonl"
    async with MCPHost({"stubborn": stubborn(log, timeout=60)}) as mcp:
        script = [tool_reply(("late", '{"seconds": 30}'))]
        async with rig(tmp_path, script, host=mcp) as r:
            root = "1600000000.300800"
            await r.deliver(mention(f"<@{BOT_USER_ID}> wait for it", ts=root))
            assert await until_received(log, "tools/call"), "the call reached the server"
            await r.deliver(event_body(stop_pressed(ALICE, CHANNEL, root, [])["event"]))
            await r.settle()
            call_id = next(m["id"] for m in received(log) if m.get("method") == "tools/call")
            cancels = await until_received(log, "notifications/cancelled")
            assert [m["params"]["requestId"] for m in cancels] == [call_id]
            assert statuses(r, root) == ["processing", "active"]
            assert "Stopped" in r.slack.thread(CHANNEL, root)[-1].text


async def until(condition: Callable[[], bool], within: float = 10.0) -> None:
    """Wait (bounded) until `condition` holds: state of the app's own tasks, looked at every 10 ms."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_stop_stops_the_answering_turn_and_a_message_waiting_behind_it_is_still_answered(
    tmp_path: Path, store_backend: Backend
) -> None:
    slow = StoppableHost()
    script: list[Reply] = [tool_reply((TOOL, "{}")), reply("the second one, answered")]
    async with rig(tmp_path, script, host=slow, backend=store_backend) as r:
        root = "1600000000.300900"
        key = ConversationKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=root)
        await r.deliver(mention(f"<@{BOT_USER_ID}> look it up", ts=root))
        async with asyncio.timeout(10):
            await slow.started.wait()
        second = f"<@{BOT_USER_ID}> and another thing"
        await r.deliver(mention(second, ts="1600000000.300901", thread_ts=root))
        await until(lambda: r.bot._turns.stops.working(key) == 2)  # the second waits for the thread
        await r.deliver(event_body(stop_pressed(ALICE, CHANNEL, root, [])["event"]))
        await r.settle()

        assert slow.cancelled, "the answering turn was the one stopped"
        texts = [m.text for m in r.slack.thread(CHANNEL, root)]
        assert any("Stopped" in text for text in texts)
        assert texts[-1] == "the second one, answered"
        kept = [m.content for m in await r.store.history(key) if m.role == "user"]
        assert len(kept) == 2 and kept[0] == "look it up" and "and another thing" in kept[1]
        assert statuses(r, root)[-1] == "active"


async def test_only_the_asker_or_an_admin_may_stop_a_turn(tmp_path: Path, store_backend: Backend) -> None:
    slow = StoppableHost()
    script: list[Reply] = [tool_reply((TOOL, "{}"))]
    async with rig(tmp_path, script, host=slow, backend=store_backend, nerve_admins=ADMIN) as r:
        root = "1600000000.301000"
        await r.deliver(mention(f"<@{BOT_USER_ID}> look it up", ts=root))
        async with asyncio.timeout(10):
            await slow.started.wait()
        # Someone else in the channel: the turn goes on, its session still working.
        assert await r.deliver(event_body(stop_pressed(BOB, CHANNEL, root, [])["event"])) == 200
        assert not slow.cancelled and statuses(r, root) == ["processing"]
        # An admin may stop anyone's turn.
        assert await r.deliver(event_body(stop_pressed(ADMIN, CHANNEL, root, [])["event"])) == 200
        await r.settle()
        assert slow.cancelled
        assert statuses(r, root) == ["processing", "active"]
        assert "Stopped" in r.slack.thread(CHANNEL, root)[-1].text


async def _parked_then_approved(r: Rig, root: str) -> str:
    """Park a turn on an approval in `root`'s thread, then approve it in this app; its request id."""
    await r.deliver(mention(f"<@{BOT_USER_ID}> add hi to the note", ts=root))
    await r.settle()
    key = ConversationKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=root)
    parked = await r.agent.parked_in(key)
    assert parked is not None
    [approval] = approval_messages(r, root)
    raw = urlencode({"payload": json.dumps(click_payload(approval, button(approval, "approve", 0), ALICE))})
    status, _ = await r.deliver_raw(raw, "application/x-www-form-urlencoded")
    assert status == 200
    await r.settle()
    return parked[0].request_id


async def test_a_resumed_turn_that_fails_takes_its_session_out_of_processing(
    tmp_path: Path,
    host: MCPHost,  # noqa: F811  (fixture)
    notes: Path,  # noqa: F811  (fixture)
    store_backend: Backend,
) -> None:
    script = [read_and_add(), reply("added hi")]
    async with rig(tmp_path, script, host=host, approvals=True, backend=store_backend) as r:
        root = "1600000000.301100"

        def answer_put_in_place(body: dict[str, Any]) -> bool:
            # The answer with its tool details (a container block): the delivery's last step. The
            # live message may show the answer before it, or not, as the edits' pace allows.
            blocks = body.get("blocks")
            blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
            return body.get("text") == "added hi" and any(b.get("type") == "container" for b in blocks)

        r.slack.fail_once("chat.update", "internal_error", when=answer_put_in_place)
        await _parked_then_approved(r, root)
        assert "went wrong" in r.slack.thread(CHANNEL, root)[-1].text
        assert statuses(r, root) == ["processing", "suspended", "processing", "active"]


async def test_a_resume_another_process_took_first_leaves_the_session_status_alone(
    tmp_path: Path,
    host: MCPHost,  # noqa: F811  (fixture)
    notes: Path,  # noqa: F811  (fixture)
    store_backend: Backend,
) -> None:
    script = [read_and_add(), reply("added hi")]
    async with rig(tmp_path, script, host=host, approvals=True, backend=store_backend) as r:
        root = "1600000000.301200"
        request_id = await _parked_then_approved(r, root)
        assert statuses(r, root) == ["processing", "suspended", "processing", "active"]
        # A runner that saw the request still parked, then lost the claim to the one that answered.
        key = ConversationKey(platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread=root)
        await r.bot._turns._resume(request_id, key, ALICE)
        assert statuses(r, root) == ["processing", "suspended", "processing", "active"]
