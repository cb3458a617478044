"""Top-level DMs on the Agent messaging experience: in the app's Messages tab a message sent at the
top level is the root of its own thread (Slack's sessions are thread-based), so nerve answers in that
thread and gives it an agent session like any thread's: processing → active, suspended while an ask
waits, stoppable. On the Assistant experience top-level DMs stay one conversation, answered top-level,
with no session."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bot.mcp.host import MCPHost
from bot.types import ConversationKey
from tests.fakes.llm_server import Reply, reply, tool_reply
from tests.fakes.slack_api import TEAM_ID
from tests.fakes.slack_sessions import stop_pressed
from tests.stores import Backend
from tests.test_slack_agent_sessions import TOOL, StoppableHost
from tests.test_slack_approvals import (  # noqa: F401  (fixtures)
    ALICE,
    approval_messages,
    button,
    click,
    host,
    notes,
    ran,
    read_and_add,
)
from tests.test_slack_harness import dm, event_body, rig

pytestmark = pytest.mark.both_stores
DM = "D0ALICE"


async def test_a_top_level_dm_gets_a_session_on_its_own_message_and_the_answer_in_its_thread(
    tmp_path: Path, store_backend: Backend
) -> None:
    question = "Is the air in Oslo clean today? Say which tools you used."
    async with rig(tmp_path, [reply("Clean enough.")], backend=store_backend) as r:
        root = "1600000000.800100"
        await r.deliver(dm(question, ts=root))
        await r.settle()
        assert r.slack.sessions.statuses(DM, root) == ["processing", "active"]
        session = r.slack.sessions.sessions[(DM, root)]
        assert session.initiator == ALICE and session.titles == ["Is the air in Oslo clean today?"]
        [first, *_] = r.slack.calls_of("agents.sessions.setStatus")
        assert first.body["thread_ts"] == root and first.body["title"] == question
        methods = [c.method for c in r.slack.calls if c.method != "auth.test"]
        assert methods.index("agents.sessions.setStatus") < methods.index("chat.postMessage")
        assert [p.text for p in r.slack.thread(DM, root)] == ["Clean enough."]
        assert r.slack.thread(DM, None) == []


async def test_a_top_level_dm_waiting_for_approval_is_suspended_then_processing_again(
    tmp_path: Path,
    host: MCPHost,  # noqa: F811  (fixture)
    notes: Path,  # noqa: F811  (fixture)
    store_backend: Backend,
) -> None:
    script = [read_and_add(), reply("added hi")]
    async with rig(tmp_path, script, host=host, approvals=True, backend=store_backend) as r:
        root = "1600000000.800200"
        await r.deliver(dm("add hi to the note", ts=root))
        await r.settle()
        assert r.slack.sessions.statuses(DM, root) == ["processing", "suspended"]
        [approval] = approval_messages(r, root, channel=DM)
        assert await click(r, approval, button(approval, "approve", 0), ALICE) == 200
        await r.settle()
        assert ran(notes) == ["read_note", "append_note"]
        assert r.slack.sessions.statuses(DM, root) == ["processing", "suspended", "processing", "active"]
        assert r.slack.thread(DM, root)[-1].text == "added hi"


async def test_stop_pressed_on_a_top_level_dms_session_stops_its_turn(
    tmp_path: Path, store_backend: Backend
) -> None:
    slow = StoppableHost()
    script: list[Reply] = [tool_reply((TOOL, "{}"))]
    async with rig(tmp_path, script, host=slow, backend=store_backend) as r:
        root = "1600000000.800300"
        await r.deliver(dm("look it up", ts=root))
        async with asyncio.timeout(10):
            await slow.started.wait()
        assert await r.deliver(event_body(stop_pressed(ALICE, DM, root, [])["event"])) == 200
        await r.settle()
        assert slow.cancelled, "the running call was cancelled"
        assert r.slack.sessions.statuses(DM, root) == ["processing", "active"]
        assert "Stopped" in r.slack.thread(DM, root)[-1].text
        key = ConversationKey(platform="slack", workspace=TEAM_ID, channel=DM, thread=root)
        assert [m.content for m in await r.store.history(key) if m.role == "user"] == ["look it up"]


async def test_on_the_assistant_experience_top_level_dms_have_no_session(
    tmp_path: Path, store_backend: Backend
) -> None:
    async with rig(tmp_path, [reply("hi")], backend=store_backend, slack_experience="assistant") as r:
        await r.deliver(dm("hello"))
        await r.settle()
        assert r.slack.calls_of("agents.sessions.setStatus") == []
        assert [p.text for p in r.slack.thread(DM, None)] == ["hi"]
        assert "agents.sessions" not in json.dumps([c.method for c in r.slack.calls])


async def test_a_top_level_dm_left_before_a_restart_is_answered_in_its_thread_with_its_session(
    tmp_path: Path, store_backend: Backend
) -> None:
    from adapters.slack.events import inbox_payload

    async with rig(tmp_path, [reply("sorry for the wait")], backend=store_backend) as r:
        root = "1600000000.800400"
        body = dm("still there?", ts=root)
        assert await r.store.claim_event("slack", body["event_id"], inbox_payload(body))
        assert await r.bot.recover() == 1
        await r.settle()
        assert [p.text for p in r.slack.thread(DM, root)] == ["sorry for the wait"]
        assert r.slack.sessions.statuses(DM, root) == ["processing", "active"]
