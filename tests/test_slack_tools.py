"""Tool calls on Slack: progress in one status message, collapsible results, fallbacks, files, escaping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.types import ToolResult
from tests.fakes.llm_server import reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import mention, rig

CHANNEL = "C0CHANNEL"
STATUS_TOOL = "get_environment_status"


def env_status(arguments: dict[str, Any]) -> ToolResult:
    return ToolResult(
        content=json.dumps({"area_code": arguments.get("area_code"), "aqi": 42}), latency_ms=12.0
    )


def tool_turn(answer: str = "The AQI is 42.", *, think: float = 0.0) -> list[Any]:
    """A round with the status tool, then the answer `think` seconds after the tool's result."""
    return [tool_reply((STATUS_TOOL, '{"area_code": "94103"}')), reply(answer, delay=think)]


def blocks_of(version: dict[str, Any]) -> list[dict[str, Any]]:
    return list(version.get("blocks") or [])


async def test_each_tool_call_becomes_a_collapsible_container_above_the_answer(tmp_path: Path) -> None:
    async with rig(tmp_path, tool_turn(), tools={STATUS_TOOL: env_status}) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> air quality?", ts="1600000000.001000"))
        await r.settle()
        [post] = r.slack.thread(CHANNEL, "1600000000.001000")
        container, answer = blocks_of(post.current)
        assert container["type"] == "container"
        assert container["is_collapsible"] is True and container["default_collapsed"] is True
        assert container["title"]["text"] == f"{STATUS_TOOL} · static"
        assert container["subtitle"]["text"].startswith("✅ ok · ")
        inside = json.dumps(container["child_blocks"])
        assert "94103" in inside and '\\"aqi\\": 42' in inside
        assert answer == {"type": "markdown", "text": "The AQI is 42."}


async def test_the_status_message_shows_each_tool_as_it_runs_then_becomes_the_answer(tmp_path: Path) -> None:
    # The model takes a moment after the tool, as models do: the finished tool shows before the
    # answer replaces the message (an answer that comes first rightly drops that edit).
    async with rig(tmp_path, tool_turn(think=0.5), tools={STATUS_TOOL: env_status}) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> air quality?", ts="1600000000.001100"))
        await r.settle()
        [post] = r.slack.thread(CHANNEL, "1600000000.001100")
        cards = [
            (task["title"], task["status"])
            for version in post.versions
            for block in blocks_of(version)
            if block["type"] == "plan"
            for task in block["tasks"]
        ]
        assert (STATUS_TOOL, "in_progress") in cards and (STATUS_TOOL, "complete") in cards
        assert post.text == "The AQI is 42."


async def test_status_updates_are_throttled_to_the_interval(tmp_path: Path) -> None:
    async with rig(tmp_path, tool_turn(), tools={STATUS_TOOL: env_status}, status_interval=60.0) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> air quality?", ts="1600000000.001200"))
        await r.settle()
        [post] = r.slack.thread(CHANNEL, "1600000000.001200")
        # Posted once, then replaced by the answer: the tool events fell inside one interval.
        assert len(post.versions) == 2 and post.text == "The AQI is 42."


async def test_refused_blocks_fall_back_to_attachments_and_the_fallback_is_remembered(tmp_path: Path) -> None:
    script = tool_turn("first") + tool_turn("second")
    async with rig(tmp_path, script, tools={STATUS_TOOL: env_status}) as r:
        r.slack.refuse_block_types = {"container", "plan"}
        for ts in ("1600000000.001300", "1600000000.001400"):
            await r.deliver(mention(f"<@{BOT_USER_ID}> air quality?", ts=ts))
            await r.settle()
        refused = [c for c in r.slack.calls if c.error == "invalid_blocks"]
        assert len(refused) == 2  # once for the status plan, once for the answer's container; never again
        for ts, answer in (("1600000000.001300", "first"), ("1600000000.001400", "second")):
            [post] = r.slack.thread(CHANNEL, ts)
            [attachment] = post.current["attachments"]
            assert attachment["color"] == "good"
            assert attachment["title"].startswith(f"{STATUS_TOOL} · static — ok")
            assert "94103" in attachment["text"] and "42" in attachment["text"]
            assert post.current["blocks"] == [{"type": "markdown", "text": answer}]


async def test_a_failed_tool_is_shown_as_an_error(tmp_path: Path) -> None:
    def broken(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(content="sensor offline", is_error=True, error_kind="execution", latency_ms=5.0)

    async with rig(tmp_path, tool_turn("It failed."), tools={STATUS_TOOL: broken}) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> air quality?", ts="1600000000.001500"))
        await r.settle()
        [post] = r.slack.thread(CHANNEL, "1600000000.001500")
        container = blocks_of(post.current)[0]
        assert container["subtitle"]["text"].startswith("❌ error")


async def test_a_result_too_big_to_show_is_uploaded_as_a_file_in_the_thread(tmp_path: Path) -> None:
    big = json.dumps({"rows": [f"row {i}" for i in range(800)]})

    def dump(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(content=big, latency_ms=3.0)

    async with rig(tmp_path, tool_turn("Here you go."), tools={STATUS_TOOL: dump}) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> dump it", ts="1600000000.001600"))
        await r.settle()
        [get_url] = r.slack.calls_of("files.getUploadURLExternal")
        [complete] = r.slack.calls_of("files.completeUploadExternal")
        assert complete.body["channel_id"] == CHANNEL and complete.body["thread_ts"] == "1600000000.001600"
        [uploaded] = r.slack.uploads.values()
        assert json.loads(uploaded) == json.loads(big)
        assert int(get_url.body["length"]) == len(uploaded)
        [post] = r.slack.thread(CHANNEL, "1600000000.001600")
        assert "attached to this thread as a file" in json.dumps(blocks_of(post.current))


async def test_pings_and_disguised_links_from_the_model_and_tools_arrive_escaped(tmp_path: Path) -> None:
    nasty = "<!channel> <!here> @everyone <!subteam^S0123|@ops> <http://evil.example|trusted.example> & co"

    def hostile(arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(content=nasty, latency_ms=1.0)

    answer = nasty + " [bank](http://evil.example/login)"
    script = [tool_reply(("hostile", "{}")), reply(answer)]
    async with rig(tmp_path, script, tools={"hostile": hostile}) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> hi", ts="1600000000.001700"))
        await r.settle()
        [post] = r.slack.thread(CHANNEL, "1600000000.001700")
        sent = json.dumps([c.body for c in r.slack.calls if c.method.startswith("chat.")], ensure_ascii=False)
        for raw in ("<!channel>", "<!here>", "<!subteam", "<http://", "@everyone", "[bank](http"):
            assert raw not in sent, raw
        assert "&lt;!channel&gt;" in post.current["blocks"][-1]["text"]
        assert "&amp; co" in post.current["blocks"][-1]["text"]
        assert "bank (http://evil.example/login)" in post.current["blocks"][-1]["text"]
        assert "&lt;!here&gt;" in json.dumps(post.current["blocks"][0]["child_blocks"])


async def test_a_long_answer_is_split_into_thread_posts_without_breaking_code_fences(tmp_path: Path) -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(1500))
    answer = "Intro paragraph.\n\n```python\n" + code + "\n```\n\n" + ("Closing words. " * 400)
    # No live edits in between (one interval is the whole turn): only the split is looked at here.
    async with rig(tmp_path, [reply(answer)], status_interval=60.0) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> long one", ts="1600000000.001800"))
        await r.settle()
        posts = r.slack.thread(CHANNEL, "1600000000.001800")
        assert len(posts) >= 3
        # The status message became the first chunk (a live edit may come between on a slow machine).
        assert posts[0].versions[0]["text"] == "Thinking…" and len(posts[0].versions) >= 2
        assert "Intro paragraph." in posts[0].current["blocks"][-1]["text"]
        texts = [p.current["blocks"][-1]["text"] for p in posts]
        for text in texts:
            assert len(text) <= 12_000
            assert text.count("```") % 2 == 0
        assert "".join(texts).count("line_1499 = 1499") == 1
        assert all(p.current["text"] for p in posts)
