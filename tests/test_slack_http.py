"""Events API over HTTP: signed deliveries through bolt's aiohttp adapter on a real local port."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tests.fakes.llm_server import Reply, reply
from tests.fakes.slack_api import BOT_ID, BOT_USER_ID
from tests.test_slack_harness import mention, message, rig, user_texts

CHANNEL = "C0CHANNEL"


async def test_a_mention_is_answered_once_in_its_thread_by_replacing_the_status_message(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, [reply("Hello **there**")]) as r:
        assert await r.deliver(mention(f"<@{BOT_USER_ID}> hi", ts="1600000000.000100")) == 200
        await r.settle()
        [post] = r.slack.thread(CHANNEL, "1600000000.000100")
        first, last = post.versions[0], post.current
        assert first["unfurl_links"] is False and first["unfurl_media"] is False
        assert last["blocks"][-1] == {"type": "markdown", "text": "Hello **there**"}
        assert last["text"] == "Hello **there**"  # the notification fallback
        assert user_texts(r.llm.requests[0])[-1] == "hi"  # the mention is stripped
        assert await r.store.unfinished_events("slack") == []


async def test_a_second_mention_in_the_thread_continues_the_same_conversation(tmp_path: Path) -> None:
    async with rig(tmp_path, [reply("first answer"), reply("second answer")]) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> remember kiwi", ts="1600000000.000200"))
        await r.settle()
        await r.deliver(mention(f"<@{BOT_USER_ID}> what fruit?", thread_ts="1600000000.000200"))
        await r.settle()
        assert user_texts(r.llm.requests[1]) == ["remember kiwi", "what fruit?"]
        answers = [p.text for p in r.slack.thread(CHANNEL, "1600000000.000200")]
        assert answers == ["first answer", "second answer"]


async def test_a_forged_signature_is_refused_with_401_and_nothing_runs(tmp_path: Path) -> None:
    async with rig(tmp_path, []) as r:
        assert await r.deliver(mention(f"<@{BOT_USER_ID}> hi"), secret="not-the-secret") == 401
        await r.settle()
        assert r.llm.requests == [] and r.slack.posted == []
        assert await r.store.unfinished_events("slack") == []


async def test_a_stale_timestamp_is_refused_with_401(tmp_path: Path) -> None:
    async with rig(tmp_path, []) as r:
        stale = int(time.time()) - 10 * 60
        assert await r.deliver(mention(f"<@{BOT_USER_ID}> hi"), timestamp=stale) == 401
        await r.settle()
        assert r.llm.requests == [] and r.slack.posted == []


async def test_a_redelivered_event_is_answered_exactly_once(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def slow_model(body: dict[str, Any]) -> Reply:
        await release.wait()
        return reply("only once")

    async with rig(tmp_path, slow_model) as r:
        body = mention(f"<@{BOT_USER_ID}> hi", ts="1600000000.000300")
        assert await r.deliver(body) == 200
        # Slack retries while the first delivery is still being answered, then once more after.
        assert await r.deliver(body, retry_num=1) == 200
        release.set()
        await r.settle()
        assert await r.deliver(body, retry_num=2) == 200
        await r.settle()
        assert len(r.llm.requests) == 1
        assert [p.text for p in r.slack.thread(CHANNEL, "1600000000.000300")] == ["only once"]


async def test_the_ack_returns_while_the_model_is_still_working(tmp_path: Path) -> None:
    release = asyncio.Event()
    model_started = asyncio.Event()

    async def slow_model(body: dict[str, Any]) -> Reply:
        model_started.set()
        await release.wait()
        return reply("done")

    async with rig(tmp_path, slow_model) as r:
        assert await r.deliver(mention(f"<@{BOT_USER_ID}> hi", ts="1600000000.000400")) == 200
        # The ack came back although the model has not answered (it cannot until released).
        async with asyncio.timeout(10):
            await model_started.wait()
        assert not release.is_set()
        assert all(p.text != "done" for p in r.slack.posted)
        release.set()
        await r.settle()
        assert [p.text for p in r.slack.thread(CHANNEL, "1600000000.000400")] == ["done"]


async def test_a_429_from_slack_is_waited_out_and_the_post_lands_once(tmp_path: Path) -> None:
    async with rig(tmp_path, [reply("after the wait")]) as r:
        r.slack.rate_limit_once("chat.postMessage", retry_after=1)
        await r.deliver(mention(f"<@{BOT_USER_ID}> hi", ts="1600000000.000500"))
        await r.settle()
        statuses = [c.status for c in r.slack.calls_of("chat.postMessage")]
        assert statuses == [429, 200]
        assert [p.text for p in r.slack.thread(CHANNEL, "1600000000.000500")] == ["after the wait"]


async def test_a_post_that_is_both_message_and_app_mention_is_answered_once(tmp_path: Path) -> None:
    async with rig(tmp_path, [reply("root"), reply("one answer")], nerve_slack_follow_threads=True) as r:
        await r.deliver(mention(f"<@{BOT_USER_ID}> start", ts="1600000000.000600"))
        await r.settle()
        text, ts = f"<@{BOT_USER_ID}> again", "1600000000.000601"
        await r.deliver(message(text, ts=ts, thread_ts="1600000000.000600"))
        await r.deliver(mention(text, ts=ts, thread_ts="1600000000.000600"))
        await r.settle()
        assert len(r.llm.requests) == 2
        assert [p.text for p in r.slack.thread(CHANNEL, "1600000000.000600")] == ["root", "one answer"]


async def test_follow_threads_answers_replies_without_a_mention_only_when_enabled(tmp_path: Path) -> None:
    for follow, expected in ((True, ["root", "followed"]), (False, ["root"])):
        script = [reply("root"), reply("followed")] if follow else [reply("root")]
        async with rig(tmp_path / str(follow), script, nerve_slack_follow_threads=follow) as r:
            await r.deliver(mention(f"<@{BOT_USER_ID}> start", ts="1600000000.000700"))
            await r.settle()
            await r.deliver(message("and the weather?", thread_ts="1600000000.000700"))
            # A thread the bot has no conversation in is never followed.
            await r.deliver(message("unrelated", thread_ts="1600000000.000799"))
            await r.settle()
            assert [p.text for p in r.slack.thread(CHANNEL, "1600000000.000700")] == expected
            assert r.slack.thread(CHANNEL, "1600000000.000799") == []


async def test_own_posts_other_bots_edits_and_deletions_are_ignored(tmp_path: Path) -> None:
    async with rig(tmp_path, [], nerve_slack_follow_threads=True) as r:
        ignored = [
            message("echo", channel="D0ALICE", channel_type="im", user=BOT_USER_ID, bot_id=BOT_ID),
            message("beep", channel="D0ALICE", channel_type="im", user="U0OTHERBOT", bot_id="B0OTHER"),
            message(
                "legacy", channel="D0ALICE", channel_type="im", user=None, subtype="bot_message", bot_id="B1"
            ),
            message(
                "",
                channel="D0ALICE",
                channel_type="im",
                user=None,
                subtype="message_changed",
                message={"text": "edited", "user": "U0ALICE"},
            ),
            message("", channel="D0ALICE", channel_type="im", user=None, subtype="message_deleted"),
            message("joined", user="U0ALICE", subtype="channel_join"),
            message("no mention, no thread"),
        ]
        for body in ignored:
            assert await r.deliver(body) == 200
        await r.settle()
        assert r.llm.requests == [] and r.slack.posted == []
        assert await r.store.unfinished_events("slack") == []


async def test_another_bot_is_answered_when_bots_are_allowed(tmp_path: Path) -> None:
    async with rig(tmp_path, [reply("hello bot")], nerve_slack_allow_bots=True) as r:
        body = message("ping", channel="D0ALICE", channel_type="im", user="U0OTHERBOT", bot_id="B0OTHER")
        await r.deliver(body)
        await r.settle()
        assert [p.text for p in r.slack.thread("D0ALICE", body["event"]["ts"])] == ["hello bot"]


async def test_a_failure_while_answering_becomes_a_short_apology_in_the_thread(tmp_path: Path) -> None:
    # Live edits held off (one interval is the whole turn), so the chat.update that fails is the answer's.
    async with rig(tmp_path, [reply("never shown")], status_interval=60.0) as r:
        r.slack.fail_next["chat.update"] = "msg_too_long"
        await r.deliver(mention(f"<@{BOT_USER_ID}> hi", ts="1600000000.000800"))
        await r.settle()
        [post] = r.slack.thread(CHANNEL, "1600000000.000800")
        assert post.text == "Sorry — something went wrong on my side while answering; please try again."
        assert "Traceback" not in post.everything()
        assert await r.store.unfinished_events("slack") == []
