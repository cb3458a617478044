"""A turn answered twice posts its answer once: the second run (after the process died, or as a
job retried elsewhere) goes on in the first run's live message and skips or finds what is out.

Each case runs the real `run_slack` over HTTP against the fake Slack and model; "the process died"
is a store write that never returns, so nothing after it runs, and the next start replays the
event from the inbox (`SlackBot.recover`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from unittest import mock

import aiohttp
import pytest

from adapters.slack.client import make_client
from tests.fakes.llm_server import reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.stores import Backend
from tests.test_slack_harness import Core, core, dm, mention, settings_for, sign
from tests.test_slack_runner import running
from tests.test_slack_shutdown import until

# The posts of a turn are kept in the store: these run on SQLite and on PostgreSQL.
pytestmark = pytest.mark.both_stores

LONG = "\n\n".join(f"Paragraph {n}: " + "word " * 400 for n in range(14))  # three messages' worth


async def _never(*_args: object) -> None:
    await asyncio.Event().wait()  # the process is gone: nothing after this runs


async def _deliver(url: str, body: dict[str, object]) -> None:
    raw = json.dumps(body)
    async with aiohttp.ClientSession() as http, http.post(url, data=raw, headers=sign(raw)) as response:
        assert response.status == 200


async def _dies_recording_the_second_message(
    c: Core,
    body: dict[str, Any],
    channel: str,
    thread: str | None,
    meanwhile: Callable[[], Awaitable[None]] | None = None,
) -> list[str]:
    """Deliver `body`, let the process "die" recording the second message of the answer, start
    again until the event is finished; returns the texts of the bot's messages there. `meanwhile`
    runs right after the delivery (while the first run answers)."""
    # A top-level DM is answered top-level on the Assistant experience (on the Agent messaging
    # experience it is the root of its own thread, as a mention's is).
    settings = settings_for(c.slack, slack_experience="assistant" if thread is None else "agent")
    record = c.inbox.record_post

    async def dies_recording_the_second(turn: str, part: str, ref: str) -> None:
        if part == "answer:1":
            await _never()
        await record(turn, part, ref)

    c.inbox.record_post = dies_recording_the_second  # type: ignore[method-assign]
    # A dead process finishes no delivery: the stop need not give the stuck one its allowance.
    with mock.patch("adapters.slack.app.DELIVERY_ALLOWANCE", 0.1):
        async with running(c.agent, settings) as url:
            await _deliver(url, body)
            if meanwhile is not None:
                await meanwhile()
            await c.slack.wait_for(lambda s: len(s.thread(channel, thread)) == 2, within=20)
    c.inbox.record_post = record  # type: ignore[method-assign]

    async with running(c.agent, settings):
        await c.inbox.wait_finished(str(body["event_id"]), within=30)
    return [p.text for p in c.slack.thread(channel, thread)]


async def test_a_part_whose_post_landed_but_was_never_recorded_is_found_in_the_thread(
    tmp_path: Path, store_backend: Backend
) -> None:
    """Died between Slack taking the second message of a long answer and recording it: the next
    start reads the thread back, finds that message by its metadata and posts only what is missing."""
    root = "1600000000.770001"
    async with core(tmp_path, [reply(LONG)], strict=False, backend=store_backend) as c:
        body = mention(f"<@{BOT_USER_ID}> tell me everything", channel="C0LONG", ts=root)
        texts = await _dies_recording_the_second_message(c, body, "C0LONG", root)
        assert len(texts) >= 3, texts
        assert len(set(texts)) == len(texts), "a message of the answer was posted twice"
        assert "".join(texts).count("Paragraph 13:") == 1
        read_back = c.slack.calls_of("conversations.replies")
        assert read_back and read_back[0].body.get("include_all_metadata") in (True, "true", "1")


async def test_a_top_level_dm_answer_in_doubt_is_found_in_the_channel_history(
    tmp_path: Path, store_backend: Backend
) -> None:
    """The same in a top-level DM, where the answer is no thread reply: found via conversations.history."""
    async with core(tmp_path, [reply(LONG)], strict=False, backend=store_backend) as c:
        texts = await _dies_recording_the_second_message(
            c, dm("tell me everything", channel="D0LONG"), "D0LONG", None
        )
        calls = [(call.method, call.error) for call in c.slack.calls if not call.method.startswith("auth")]
        assert len(set(texts)) == len(texts), f"a message of the answer was posted twice: {calls}"
        assert "".join(texts).count("Paragraph 13:") == 1, calls
        assert c.slack.calls_of("conversations.history"), calls


async def test_a_first_message_the_live_message_already_showed_is_not_posted_again(
    tmp_path: Path, store_backend: Backend
) -> None:
    """The live message showed the answer's first message word for word before the model finished,
    so the answer went on from the second one: the live message is that first message, and the next
    start (after dying on the second) posts neither of them again."""
    first = LONG[: LONG.index("Paragraph 4:")].rstrip("\n")
    # All the text at once, then the model holds the stream open until the live message shows it.
    slow = reply(LONG, chunk_chars=len(LONG), stall_after=2, stall=30)
    async with core(tmp_path, [slow], strict=False, backend=store_backend) as c:

        async def shown_then_finished() -> None:
            await c.slack.wait_for(
                lambda s: any(p.text == first for p in s.thread("D0SHOWN", None)), within=20
            )
            c.llm.unstall()

        texts = await _dies_recording_the_second_message(
            c, dm("tell me everything", channel="D0SHOWN"), "D0SHOWN", None, shown_then_finished
        )
        calls = [(call.method, call.error) for call in c.slack.calls if not call.method.startswith("auth")]
        assert texts[0] == first, calls
        assert len(set(texts)) == len(texts), f"a message of the answer was posted twice: {calls}"
        assert "".join(texts).count("Paragraph 0:") == 1, calls
        assert "".join(texts).count("Paragraph 13:") == 1, calls


async def test_a_turn_cut_off_while_thinking_is_answered_in_its_own_live_message(
    tmp_path: Path, store_backend: Backend
) -> None:
    """Cut off while the model works: the live message says the answer follows, and after the
    restart the answer replaces it; no second "Thinking…" and no new message."""
    root = "1600000000.770101"
    async with core(
        tmp_path, [reply("too late", delay=60), reply("the answer")], strict=False, backend=store_backend
    ) as c:
        settings = settings_for(c.slack)
        body = mention(f"<@{BOT_USER_ID}> think hard", channel="C0SLOW", ts=root)
        async with running(c.agent, settings) as url:
            await _deliver(url, body)
            await c.slack.wait_for(lambda s: len(s.thread("C0SLOW", root)) == 1, within=10)
            await until(lambda: bool(c.llm.requests), 10, "the model was never asked")
        live = c.slack.thread("C0SLOW", root)[0]
        assert "restarted" in live.text
        async with running(c.agent, settings):
            await c.inbox.wait_finished(str(body["event_id"]), within=30)
        thread = c.slack.thread("C0SLOW", root)
        assert [p.ts for p in thread] == [live.ts]
        assert thread[0].text == "the answer"


def _second_message(body: dict[str, Any]) -> bool:
    return "Paragraph 4:" in str(body.get("text") or "")


@pytest.mark.parametrize(
    ("status", "stored"),
    [(None, True), (500, True), (503, False)],
    ids=["connection-dropped", "500-after-storing", "503-before-storing"],
)
async def test_a_message_whose_answer_from_slack_was_lost_is_in_the_thread_once(
    tmp_path: Path, store_backend: Backend, status: int | None, stored: bool
) -> None:
    """Slack took the second message of a long answer, but its answer never came back (the
    connection dropped, or a 5xx after storing it): the thread is read back and the message adopted,
    not sent again. One Slack failed before storing is looked for, not found, and sent again."""
    root = "1600000000.770201"
    async with core(tmp_path, [reply(LONG)], strict=False, backend=store_backend) as c:
        c.slack.drop_response_once("chat.postMessage", status=status, stored=stored, when=_second_message)
        body = mention(f"<@{BOT_USER_ID}> tell me everything", channel="C0LOST", ts=root)
        async with running(c.agent, settings_for(c.slack)) as url:
            await _deliver(url, body)
            await c.inbox.wait_finished(str(body["event_id"]), within=30)
        texts = [p.text for p in c.slack.thread("C0LOST", root)]
        sends = [call.status for call in c.slack.calls_of("chat.postMessage") if _second_message(call.body)]
        assert len(set(texts)) == len(texts), f"a message of the answer was posted twice: {sends}"
        assert "".join(texts).count("Paragraph 4:") == 1
        assert "".join(texts).count("Paragraph 13:") == 1
        assert not any("went wrong" in text for text in texts)
        assert sends == ([status or 0] if stored else [status, 200])
        read_back = c.slack.calls_of("conversations.replies")
        assert read_back and read_back[0].body.get("include_all_metadata") in (True, "true", "1")


async def test_a_turns_post_refused_with_429_is_still_waited_out_and_posted_once(
    tmp_path: Path, store_backend: Backend
) -> None:
    """Slack stores nothing it answers 429 to: the client waits out Retry-After and sends it again."""
    root = "1600000000.770301"
    async with core(tmp_path, [], strict=False, backend=store_backend) as c:
        c.slack.rate_limit_once("chat.postMessage", retry_after=0)
        body = mention(f"<@{BOT_USER_ID}>", channel="C0WAIT", ts=root)
        async with running(c.agent, settings_for(c.slack)) as url:
            await _deliver(url, body)
            await c.inbox.wait_finished(str(body["event_id"]), within=30)
        assert [call.status for call in c.slack.calls_of("chat.postMessage")] == [429, 200]
        assert len(c.slack.thread("C0WAIT", root)) == 1
        assert not c.slack.calls_of("conversations.replies")


async def test_a_post_outside_a_turns_posts_is_still_sent_again_after_a_dropped_connection() -> None:
    """A message without a turn's metadata cannot be found again: the client's own retry stays."""
    async with FakeSlack() as slack:
        slack.drop_response_once("chat.postMessage")
        client = make_client(settings_for(slack))
        response = await client.chat_postMessage(channel="C0PLAIN", text="a note")
        assert response["ok"]
        assert [call.status for call in slack.calls_of("chat.postMessage")] == [0, 200]
