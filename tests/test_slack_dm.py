"""DMs as a personal assistant, the assistant container, and the /nerve command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.types import ToolResult
from tests.fakes.llm_server import Reply, reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID
from tests.test_slack_harness import dm, event_body, mention, rig, user_texts


def echo(body: dict[str, Any]) -> Reply:
    return reply("echo: " + user_texts(body)[-1])


@pytest.mark.parametrize("experience", ["agent", "assistant"])
async def test_dms_from_two_users_stay_separate(tmp_path: Path, experience: str) -> None:
    async with rig(tmp_path, echo, slack_experience=experience) as r:
        await r.deliver(dm("my secret is mango", channel="D0ALICE", user="U0ALICE"))
        await r.settle()
        asked = dm("what is my secret?", channel="D0BOB", user="U0BOB")
        await r.deliver(asked)
        await r.settle()
        bob_saw = json.dumps(r.llm.requests[1]["messages"])
        assert "mango" not in bob_saw
        assert user_texts(r.llm.requests[1]) == ["what is my secret?"]
        # Answered in the thread of Bob's message (Agent messaging experience), else top-level.
        where = asked["event"]["ts"] if experience == "agent" else None
        assert [p.text for p in r.slack.thread("D0BOB", where)] == ["echo: what is my secret?"]


async def test_each_top_level_dm_opens_its_own_thread_and_conversation_on_the_agent_experience(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, echo) as r:  # SLACK_EXPERIENCE=agent, the default
        one, two = "1600000000.001900", "1600000000.001910"
        await r.deliver(dm(f"<@{BOT_USER_ID}> one", ts=one))
        await r.settle()
        await r.deliver(dm("more on one", thread_ts=one))
        await r.settle()
        await r.deliver(dm("two", ts=two))
        await r.settle()
        assert user_texts(r.llm.requests[1]) == ["one", "more on one"]  # the thread goes on
        assert user_texts(r.llm.requests[2]) == ["two"]  # a new message at the top: a new one
        assert r.slack.thread("D0ALICE", None) == []
        assert [p.text for p in r.slack.thread("D0ALICE", one)] == ["echo: one", "echo: more on one"]
        assert [p.text for p in r.slack.thread("D0ALICE", two)] == ["echo: two"]


async def test_top_level_dms_continue_one_conversation_and_a_dm_thread_is_its_own(tmp_path: Path) -> None:
    async with rig(tmp_path, echo, slack_experience="assistant") as r:
        await r.deliver(dm(f"<@{BOT_USER_ID}> one"))
        await r.settle()
        await r.deliver(dm("two"))
        await r.settle()
        await r.deliver(dm("in a thread", thread_ts="1600000000.002000"))
        await r.settle()
        assert user_texts(r.llm.requests[1]) == ["one", "two"]
        assert user_texts(r.llm.requests[2]) == ["in a thread"]
        # Top-level DMs are answered top-level, like a chat; a DM thread is answered in the thread.
        assert [p.text for p in r.slack.thread("D0ALICE", None)] == ["echo: one", "echo: two"]
        assert [p.text for p in r.slack.thread("D0ALICE", "1600000000.002000")] == ["echo: in a thread"]


async def test_a_dm_is_never_mixed_into_a_channel_thread(tmp_path: Path) -> None:
    async with rig(tmp_path, echo) as r:
        await r.deliver(dm("private plans"))
        await r.settle()
        await r.deliver(mention(f"<@{BOT_USER_ID}> public question", ts="1600000000.002100"))
        await r.settle()
        assert user_texts(r.llm.requests[1]) == ["public question"]


async def test_an_assistant_thread_gets_suggested_prompts_and_a_native_status(tmp_path: Path) -> None:
    async with rig(tmp_path, echo, slack_experience="assistant") as r:
        started = {
            "type": "assistant_thread_started",
            "assistant_thread": {
                "user_id": "U0ALICE",
                "channel_id": "D0ALICE",
                "thread_ts": "1600000000.002200",
                "context": {},
            },
            "event_ts": "1600000000.002201",
        }
        assert await r.deliver(event_body(started)) == 200
        await r.deliver(dm("hello assistant", thread_ts="1600000000.002200"))
        await r.settle()
        [prompts] = r.slack.calls_of("assistant.threads.setSuggestedPrompts")
        assert prompts.body["channel_id"] == "D0ALICE" and prompts.body["thread_ts"] == "1600000000.002200"
        assert len(prompts.body["prompts"]) >= 1
        [status] = r.slack.calls_of("assistant.threads.setStatus")
        assert status.body["status"] == "is thinking…" and status.body["thread_ts"] == "1600000000.002200"
        [post] = r.slack.thread("D0ALICE", "1600000000.002200")
        assert len(post.versions) == 1 and post.text == "echo: hello assistant"  # no status message


async def test_a_dm_thread_outside_the_assistant_container_falls_back_to_a_status_message(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, echo) as r:
        r.slack.fail_next["assistant.threads.setStatus"] = "not_allowed_token_type"
        await r.deliver(dm("hello", thread_ts="1600000000.002300"))
        await r.settle()
        [post] = r.slack.thread("D0ALICE", "1600000000.002300")
        assert post.versions[0]["text"] == "Thinking…" and post.text == "echo: hello"


def command(text: str, channel: str) -> str:
    return urlencode(
        {
            "command": "/nerve",
            "text": text,
            "team_id": TEAM_ID,
            "channel_id": channel,
            "channel_name": "directmessage" if channel.startswith("D") else "general",
            "user_id": "U0ALICE",
            "user_name": "alice",
            "trigger_id": "1.2.3",
            "response_url": "http://127.0.0.1:9/unused",
            "token": "legacy",
        }
    )


async def test_slash_tools_lists_the_tools_ephemerally(tmp_path: Path) -> None:
    async with rig(tmp_path, [], tools={"get_environment_status": lambda a: ToolResult(content="{}")}) as r:
        status, text = await r.deliver_raw(command("tools", "C0CHANNEL"), "application/x-www-form-urlencoded")
        assert status == 200
        body = json.loads(text)
        assert body["response_type"] == "ephemeral" and "get_environment_status" in body["text"]


async def test_slash_reset_in_a_dm_starts_a_new_dm_conversation(tmp_path: Path) -> None:
    async with rig(tmp_path, echo, slack_experience="assistant") as r:
        await r.deliver(dm("old topic"))
        await r.settle()
        status, _ = await r.deliver_raw(command("reset", "D0ALICE"), "application/x-www-form-urlencoded")
        assert status == 200
        await r.settle()
        [confirm] = r.slack.calls_of("chat.postEphemeral")
        assert confirm.body["channel"] == "D0ALICE" and confirm.body["user"] == "U0ALICE"
        await r.deliver(dm("new topic"))
        await r.settle()
        assert user_texts(r.llm.requests[-1]) == ["new topic"]


async def test_slash_reset_in_a_dm_on_the_agent_experience_says_each_top_level_message_is_new(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, echo) as r:
        await r.deliver(dm("old topic"))
        await r.settle()
        status, text = await r.deliver_raw(command("reset", "D0ALICE"), "application/x-www-form-urlencoded")
        assert status == 200 and "starts a new conversation in its own thread" in json.loads(text)["text"]
        await r.deliver(dm("new topic"))
        await r.settle()
        assert user_texts(r.llm.requests[-1]) == ["new topic"]


async def test_slash_reset_in_a_channel_explains_how_to_reset_a_thread(tmp_path: Path) -> None:
    async with rig(tmp_path, []) as r:
        status, text = await r.deliver_raw(command("reset", "C0CHANNEL"), "application/x-www-form-urlencoded")
        assert status == 200 and "mention me there with the word `reset`" in json.loads(text)["text"]
        status, text = await r.deliver_raw(command("", "C0CHANNEL"), "application/x-www-form-urlencoded")
        assert "/nerve tools" in json.loads(text)["text"]


async def test_mentioning_reset_in_a_thread_starts_that_thread_over(tmp_path: Path) -> None:
    async with rig(tmp_path, echo) as r:
        root = "1600000000.002400"
        await r.deliver(mention(f"<@{BOT_USER_ID}> remember plum", ts=root))
        await r.settle()
        await r.deliver(mention(f"<@{BOT_USER_ID}> reset", thread_ts=root))
        await r.settle()
        await r.deliver(mention(f"<@{BOT_USER_ID}> what fruit?", thread_ts=root))
        await r.settle()
        assert user_texts(r.llm.requests[-1]) == ["what fruit?"]
        assert "Started a new conversation" in r.slack.thread("C0CHANNEL", root)[1].text
