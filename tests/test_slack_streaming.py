"""Live answers on Slack: one streaming message where the workspace has them, one edited message where
it has not; tool calls as tasks, the final blocks and feedback, rate limits, re-deliveries, cut streams."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from adapters.slack.live import SafePieces, stable_cut
from adapters.slack.render import safe_markdown
from bot.store.rows import KEY_WHERE, key_params
from bot.turn.loop import CUT_OFF_NOTE
from bot.types import CallContext, ConversationKey, ToolResult, ToolSpec
from tests.fakes.llm_server import Reply, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, FakeSlack, Posted
from tests.test_slack_harness import Rig, StaticHost, dm, mention, rig

CHANNEL = "C0CHANNEL"
TOOL = "get_environment_status"
ANSWER = "The air in 94103 is good today: AQI 42, a light breeze, and no smoke anywhere near the bay."


def env_status(arguments: dict[str, Any]) -> ToolResult:
    return ToolResult(content=json.dumps({"aqi": 42}), latency_ms=12.0)


def broken(arguments: dict[str, Any]) -> ToolResult:
    return ToolResult(content="sensor offline", is_error=True, error_kind="execution", latency_ms=5.0)


def streamed(text: str = ANSWER, **pacing: Any) -> Reply:
    return reply(text, chunk_chars=pacing.pop("chunk_chars", 6), **pacing)


async def votes(r: Rig, key: ConversationKey) -> list[Any]:
    """The votes stored in the thread as (rating, user, answer's ts, event), oldest first."""
    return await r.store._rows(
        f"SELECT rating, user_id, message_ts, event_id FROM feedback WHERE {KEY_WHERE}"
        " ORDER BY created_at, message_ts",
        key_params(key),
    )


def text_calls(slack: FakeSlack) -> list[str]:
    """The markdown each stream call carried, in order (empty calls left out)."""
    out = []
    for call in slack.calls:
        if call.ok and call.method in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
            text = "".join(c["text"] for c in call.body.get("chunks") or [] if c["type"] == "markdown_text")
            if text:
                out.append(text)
    return out


def tasks_seen(message: Posted) -> list[tuple[str, str]]:
    """Every (task title, status) a stream showed, in order, without repeats."""
    seen: list[tuple[str, str]] = []
    for version in message.versions:
        for task in version.get("tasks", {}).values():
            pair = (task["title"], task["status"])
            if pair not in seen:
                seen.append(pair)
    return seen


def answers_in(slack: FakeSlack, thread: str, channel: str = CHANNEL) -> list[Posted]:
    return slack.thread(channel, thread)


# --- the text pieces ------------------------------------------------------------------------------


def test_a_piece_ends_after_a_whole_word_so_a_split_ping_is_still_broken() -> None:
    pieces = SafePieces()
    out = []
    for delta in ("ping @he", "re now", " please"):
        pieces.add(delta)
        out.append(pieces.take(final=False))
    out.append(pieces.take(final=True))
    assert "".join(out) == safe_markdown("ping @here now please")
    assert "@here" not in "".join(out)


def test_a_link_split_across_pieces_is_held_back_until_it_can_be_shown_with_its_target() -> None:
    text = "See [your bank](http://evil.example/login) today"
    assert stable_cut(text[:20]) == text.index("[")  # "[your bank](htt" may still become a link
    pieces = SafePieces()
    out = []
    for i in range(0, len(text), 5):
        pieces.add(text[i : i + 5])
        out.append(pieces.take(final=False))
    out.append(pieces.take(final=True))
    joined = "".join(out)
    assert joined == safe_markdown(text)
    assert "your bank (http://evil.example/login)" in joined and "](" not in joined


def test_a_bracket_that_cannot_become_a_link_does_not_hold_text_back() -> None:
    assert stable_cut("a [note] and more ") == len("a [note] and more ")
    assert stable_cut("[x\nnext line ") == len("[x\nnext line ")


# --- a workspace with streaming messages ---------------------------------------------------------


async def test_the_first_words_stream_into_the_thread_while_the_model_is_still_writing(
    tmp_path: Path,
) -> None:
    # The model sends its first words, then stalls until the test has seen them arrive at Slack.
    script = [streamed(stall_after=6, stall=10.0)]
    async with rig(tmp_path, script) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100100"))
        await r.slack.wait_for(lambda s: bool(text_calls(s)))
        [live] = r.slack.streams()
        assert live.streaming is True  # still open: the model has not finished
        assert ANSWER.startswith(live.text) and 0 < len(live.text) < len(ANSWER)
        r.llm.unstall()
        await r.settle()

        [message] = answers_in(r.slack, "1600000000.100100")
        assert message is live and message.streaming is False
        assert message.text == ANSWER
        [start] = r.slack.calls_of("chat.startStream")
        assert start.body["thread_ts"] == "1600000000.100100"
        assert start.body["recipient_user_id"] == "U0ALICE" and start.body["recipient_team_id"] == TEAM_ID
        assert len(r.slack.calls_of("chat.stopStream")) == 1
        assert r.slack.calls_of("chat.postMessage") == [] and r.slack.calls_of("chat.update") == []


async def test_appends_are_batched_to_a_few_a_second(tmp_path: Path) -> None:
    # 60 small pieces over about 1.2 s, appends at most every 0.4 s: a handful of calls, not 60.
    script = [streamed(chunk_chars=2, chunk_delay=0.02)]
    async with rig(tmp_path, script, stream_interval=0.4) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100200"))
        await r.settle()
        [message] = answers_in(r.slack, "1600000000.100200")
        assert message.text == ANSWER and message.streaming is False
        assert len(text_calls(r.slack)) >= 2  # in several pieces, while the model wrote
        stream_calls = [c for c in r.slack.calls if c.method.startswith("chat.") and "Stream" in c.method]
        assert len(stream_calls) <= 8
        gaps = [b.at - a.at for a, b in itertools.pairwise(stream_calls[:-1])]
        assert all(gap >= 0.3 for gap in gaps[1:])  # appends keep their distance


class GatedHost(StaticHost):
    """Tools that run until the test lets them finish, so it can see them running."""

    def __init__(self, tools: dict[str, Any]) -> None:
        super().__init__(tools)
        self.gate = asyncio.Event()

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        async with asyncio.timeout(10):
            await self.gate.wait()
        return await super().call_tool(name, arguments)


def task_status(slack: FakeSlack, title: str) -> str | None:
    streams = slack.streams()
    found = [t for t in streams[-1].current["tasks"].values() if t["title"] == title] if streams else []
    return str(found[0]["status"]) if found else None


async def test_each_tool_call_is_a_task_that_runs_then_completes_with_its_outcome(tmp_path: Path) -> None:
    host = GatedHost({TOOL: env_status})
    script = [tool_reply((TOOL, '{"area_code": "94103"}')), streamed()]
    async with rig(tmp_path, script, host=host) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100300"))
        await r.slack.wait_for(lambda s: task_status(s, TOOL) == "in_progress")
        host.gate.set()
        await r.settle()
        [message] = answers_in(r.slack, "1600000000.100300")
        [task] = [t for t in message.current["tasks"].values() if t["title"] == TOOL]
        assert task["status"] == "complete" and task["output"].startswith("ok · ")
        assert message.text == ANSWER

        container, feedback = message.current["blocks"]
        assert container["type"] == "container" and container["title"]["text"] == f"{TOOL} · static"
        assert "94103" in json.dumps(container["child_blocks"])
        assert feedback["type"] == "context_actions"
        [buttons] = feedback["elements"]
        assert buttons["type"] == "feedback_buttons"
        assert {buttons["positive_button"]["value"][:3], buttons["negative_button"]["value"][:5]} == {
            "up|",
            "down|",
        }


async def test_a_failed_tool_call_ends_as_an_error_task(tmp_path: Path) -> None:
    script = [tool_reply((TOOL, "{}")), streamed("It failed.")]
    async with rig(tmp_path, script, tools={TOOL: broken}) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100400"))
        await r.settle()
        [message] = answers_in(r.slack, "1600000000.100400")
        [task] = [t for t in message.current["tasks"].values() if t["title"] == TOOL]
        assert task["status"] == "error" and task["output"].startswith("error · ")


def feedback_click(message: Posted, rating: str, user: str = "U0BOB") -> dict[str, Any]:
    [block] = [b for b in message.current["blocks"] if b["type"] == "context_actions"]
    button = block["elements"][0]["positive_button" if rating == "up" else "negative_button"]
    return {
        "type": "block_actions",
        "user": {"id": user, "team_id": TEAM_ID},
        "team": {"id": TEAM_ID},
        "container": {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": False,
            "thread_ts": message.thread_ts,
        },
        "channel": {"id": message.channel},
        "message": {"ts": message.ts, "thread_ts": message.thread_ts},
        "trigger_id": "1.2.3",
        "actions": [
            {
                "type": "feedback_buttons",
                "action_id": block["elements"][0]["action_id"],
                "block_id": "fb",
                "value": button["value"],
                "action_ts": "1700000000.000002",
            }
        ],
    }


async def click(r: Rig, payload: dict[str, Any]) -> int:
    status, _ = await r.deliver_raw(
        urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded"
    )
    await r.settle()
    return status


async def test_a_feedback_click_is_stored_with_the_turn_and_a_second_click_replaces_it(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, [streamed()]) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100500", event_id="EvFEEDBACK1"))
        await r.settle()
        [message] = answers_in(r.slack, "1600000000.100500")
        key = ConversationKey(
            platform="slack", workspace=TEAM_ID, channel=CHANNEL, thread="1600000000.100500"
        )

        assert await click(r, feedback_click(message, "up")) == 200
        [vote] = await votes(r, key)
        assert tuple(vote) == (
            "up",
            "U0BOB",
            message.ts,
            "EvFEEDBACK1",
        )

        assert await click(r, feedback_click(message, "down")) == 200
        assert [v[0] for v in await votes(r, key)] == ["down"]


async def test_appends_rate_limited_by_slack_lose_no_words_and_repeat_none(tmp_path: Path) -> None:
    script = [streamed(chunk_chars=3, chunk_delay=0.01)]
    async with rig(tmp_path, script, stream_interval=0.05) as r:
        r.slack.streaming = True
        r.slack.rate_limit_every("chat.appendStream", 2)
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100600"))
        await r.settle(within=20)
        assert [c for c in r.slack.calls if c.status == 429]
        [message] = answers_in(r.slack, "1600000000.100600")
        assert message.text == ANSWER
        assert "".join(text_calls(r.slack)) == ANSWER  # every word sent exactly once


async def test_a_redelivered_event_streams_nothing_new(tmp_path: Path) -> None:
    async with rig(tmp_path, [streamed()]) as r:
        r.slack.streaming = True
        body = mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100700")
        await r.deliver(body)
        await r.settle()
        assert await r.deliver(body, retry_num=1) == 200
        await r.settle()
        assert len(r.slack.calls_of("chat.startStream")) == 1
        assert len(answers_in(r.slack, "1600000000.100700")) == 1


async def test_a_stream_the_model_cut_off_ends_with_the_note_in_the_same_message(tmp_path: Path) -> None:
    script = [streamed(cut_after=8, chunk_delay=0.01)]
    async with rig(tmp_path, script) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100800"))
        await r.settle()
        [message] = answers_in(r.slack, "1600000000.100800")
        shown, note = message.text.split("\n\n", 1)
        assert ANSWER.startswith(shown) and len(shown) < len(ANSWER)
        assert note == safe_markdown(CUT_OFF_NOTE)
        assert r.slack.calls_of("chat.postMessage") == []


async def test_words_shown_before_tool_calls_are_replaced_by_the_final_answer(tmp_path: Path) -> None:
    script = [tool_reply((TOOL, "{}"), content="Let me look that up for you first."), streamed()]
    async with rig(tmp_path, script, tools={TOOL: env_status}) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.100900"))
        await r.settle()
        [message] = answers_in(r.slack, "1600000000.100900")
        assert "Let me look" in message.everything()  # it was shown while the tool ran
        assert message.text == ANSWER and "Let me look" not in json.dumps(message.current)
        kinds = [b["type"] for b in message.current["blocks"]]
        assert kinds == ["container", "markdown", "context_actions"]
        assert r.slack.calls_of("chat.postMessage") == []


async def test_an_answer_too_long_for_one_message_streams_then_continues_in_posts_at_the_end(
    tmp_path: Path,
) -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(1500))
    answer = "Intro paragraph.\n\n```python\n" + code + "\n```\n\n" + ("Closing words. " * 400)
    async with rig(tmp_path, [reply(answer, chunk_chars=400)]) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> long one", ts="1600000000.101000"))
        await r.settle()
        posts = answers_in(r.slack, "1600000000.101000")
        assert len(posts) >= 3 and posts[0].streaming is False
        texts = [posts[0].text] + [p.current["blocks"][-1]["text"] for p in posts[1:]]
        assert all(len(t) <= 12_000 and t.count("```") % 2 == 0 for t in texts)
        assert "".join(texts).count("line_1499 = 1499") == 1
        streamed_calls = [c.at for c in r.slack.calls_of("chat.stopStream")]
        posted = [c.at for c in r.slack.calls_of("chat.postMessage")]
        assert streamed_calls and all(at > streamed_calls[0] for at in posted)  # split only at the end


async def test_pings_and_disguised_links_arrive_escaped_in_every_streamed_piece(tmp_path: Path) -> None:
    nasty = "<!channel> hi @everyone, see [bank](http://evil.example/login) & <http://evil|trusted> ok"
    async with rig(tmp_path, [reply(nasty, chunk_chars=3, chunk_delay=0.005)]) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> hi", ts="1600000000.101100"))
        await r.settle()
        sent = json.dumps([c.body for c in r.slack.calls if c.method.startswith("chat.")], ensure_ascii=False)
        for raw in ("<!channel>", "@everyone", "[bank](http", "<http://"):
            assert raw not in sent, raw
        [message] = answers_in(r.slack, "1600000000.101100")
        assert message.text == safe_markdown(nasty) and message.streaming is False
        assert len(text_calls(r.slack)) >= 2


async def test_an_assistant_thread_shows_its_status_until_the_first_words_then_streams(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, [streamed()], slack_experience="assistant") as r:
        r.slack.streaming = True
        await r.deliver(dm("air?", thread_ts="1600000000.101200"))
        await r.settle()
        methods = [c.method for c in r.slack.calls if c.ok and c.method != "auth.test"]
        assert methods[0] == "assistant.threads.setStatus"
        assert methods.index("assistant.threads.setStatus") < methods.index("chat.startStream")
        [message] = answers_in(r.slack, "1600000000.101200", channel="D0ALICE")
        assert message.text == ANSWER and message.current["tasks"] == {}  # no "Thinking…" task here
        [start] = r.slack.calls_of("chat.startStream")
        assert "".join(c.get("text", "") for c in start.body["chunks"])  # it started with words


async def test_a_stream_slack_stopped_taking_is_finished_by_editing_the_same_message(tmp_path: Path) -> None:
    async with rig(tmp_path, [streamed(stall_after=6, stall=10.0)]) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.101300"))
        await r.slack.wait_for(lambda s: bool(text_calls(s)))
        [live] = r.slack.streams()
        r.slack.expire_stream(live.ts)
        r.llm.unstall()
        await r.settle()
        assert [c.error for c in r.slack.calls_of("chat.appendStream") if not c.ok][:1] == [
            "message_not_in_streaming_state"
        ]
        [message] = answers_in(r.slack, "1600000000.101300")
        assert message is live and message.text == ANSWER
        assert r.slack.calls_of("chat.postMessage") == []


async def test_a_parked_turn_shows_waiting_for_approval_in_its_stream(tmp_path: Path) -> None:
    class AskingHost(StaticHost):
        def list_tools(self) -> list[ToolSpec]:
            return [dataclasses.replace(spec, approval="always") for spec in super().list_tools()]

    host = AskingHost({TOOL: env_status})
    script = [tool_reply((TOOL, "{}"))]
    async with rig(tmp_path, script, host=host, approvals=True) as r:
        r.slack.streaming = True
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.101400"))
        await r.settle()
        live, approval = answers_in(r.slack, "1600000000.101400")
        assert live.streaming is False and live.text.startswith("Waiting for approval to run")
        [task] = [t for t in live.current["tasks"].values() if t["title"] == TOOL]
        assert task["status"] == "pending" and task["details"] == "waiting for approval"
        assert not any(b["type"] == "context_actions" for b in live.current["blocks"])
        assert "nerve_approval" in json.dumps(approval.current)


# --- a workspace without streaming messages ------------------------------------------------------


async def test_without_streaming_one_message_is_edited_as_words_arrive_then_becomes_the_answer(
    tmp_path: Path,
) -> None:
    script = [streamed(stall_after=6, stall=10.0), streamed("Second answer, also edited in place.")]
    async with rig(tmp_path, script) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.101500"))
        await r.slack.wait_for(lambda s: any(c.method == "chat.update" for c in s.calls))
        [live] = answers_in(r.slack, "1600000000.101500")
        assert ANSWER.startswith(live.text) and 0 < len(live.text) < len(ANSWER)  # words while writing
        r.llm.unstall()
        await r.settle()
        [message] = answers_in(r.slack, "1600000000.101500")
        assert message.versions[0]["text"] == "Thinking…" and message.text == ANSWER
        assert [c.error for c in r.slack.calls_of("chat.startStream")] == ["unknown_method"]

        await r.deliver(mention(f"<@{BOT_USER_ID}> again?", ts="1600000000.101600"))
        await r.settle()
        assert len(r.slack.calls_of("chat.startStream")) == 1  # the workspace's answer is remembered
        [second] = answers_in(r.slack, "1600000000.101600")
        assert second.text == "Second answer, also edited in place."


async def test_without_streaming_edits_are_throttled_to_about_one_a_second(tmp_path: Path) -> None:
    script = [streamed(chunk_chars=2, chunk_delay=0.02)]  # about 1.2 s of writing
    async with rig(tmp_path, script, status_interval=1.0) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.101700"))
        await r.settle()
        [message] = answers_in(r.slack, "1600000000.101700")
        assert message.text == ANSWER
        updates = r.slack.calls_of("chat.update")
        assert 2 <= len(updates) <= 3  # the words as they came, then the answer
        live = updates[0].body["blocks"][-1]["text"]
        assert ANSWER.startswith(live) and len(live) < len(ANSWER)
        assert all(b.at - a.at >= 0.9 for a, b in itertools.pairwise(updates[:-1]))


async def test_a_place_that_cannot_stream_gets_an_edited_message_and_the_workspace_keeps_streaming(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, [streamed(), streamed("In a thread that can.")]) as r:
        r.slack.streaming = True
        r.slack.fail_next["chat.startStream"] = "channel_type_not_supported"
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.101800"))
        await r.settle()
        [first] = answers_in(r.slack, "1600000000.101800")
        assert first.streaming is None and first.text == ANSWER
        await r.deliver(mention(f"<@{BOT_USER_ID}> again?", ts="1600000000.101900"))
        await r.settle()
        [second] = answers_in(r.slack, "1600000000.101900")
        assert second.streaming is False and second.text == "In a thread that can."


async def test_without_streaming_the_first_words_show_without_waiting_out_the_edit_interval(
    tmp_path: Path,
) -> None:
    # Edits are an hour apart here, yet the first words (well after the placeholder) show at once.
    script = [streamed(first_token_delay=0.6, stall_after=4, stall=10.0)]
    async with rig(tmp_path, script, status_interval=3600.0) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> air?", ts="1600000000.102000"))
        await r.slack.wait_for(lambda s: any(c.method == "chat.update" for c in s.calls))
        [live] = answers_in(r.slack, "1600000000.102000")
        assert live.text and ANSWER.startswith(live.text)
        r.llm.unstall()
        await r.settle()
        assert live.text == ANSWER and len(live.versions) == 3
