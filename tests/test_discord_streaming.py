"""Live answers on Discord: real discord.py against the fake Discord, the real Agent and store, and
the real `openai` client reading a paced stream from the fake model service.

Ordering is asserted at the fakes: a stream held in a stall (`stall_after`) proves the model had
not finished when Discord received the first text; pacing (`chunk_delay`) and the fake's request
times bound how often a message is edited."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.discord.live import LiveView
from adapters.discord.render import MESSAGE_LIMIT, layout
from bot.store.sqlite import SQLiteStore
from bot.turn.loop import CUT_OFF_NOTE
from bot.types import TurnEvent
from tests.fakes.discord_api import FakeDiscord, Recorded, running_bot
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Reply, reply
from tests.test_discord_bot import CALLBACK, ORIGINAL, THREADS, FakeTools, agent_for, button_ids

WORDS = (
    "Streaming answers arrive a few words at a time, and the message grows while the model is still "
    "writing the rest of it. "
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


def channel_posts(fake: FakeDiscord, channel_id: int) -> list[Recorded]:
    return fake.find("POST", rf"/channels/{channel_id}/messages")


def edits_of(fake: FakeDiscord, channel_id: int, message_id: int | str) -> list[Recorded]:
    return fake.find("PATCH", rf"/channels/{channel_id}/messages/{message_id}")


def content_of(record: Recorded) -> str:
    body = record.body()
    return str(body.get("content") or "") if isinstance(body, dict) else ""


def answers_in(fake: FakeDiscord, channel_id: int) -> list[dict[str, Any]]:
    return fake.bot_messages(channel_id)


def with_text(records: list[Recorded]) -> list[Recorded]:
    return [r for r in records if r.status == 200 and content_of(r).strip()]


# --- the first words, while the model is still writing --------------------------------------------


async def test_a_mention_shows_its_first_words_while_the_model_is_still_writing_then_the_whole_answer(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    answer = WORDS * 3
    # Held after 6 chunks (the role chunk and 5 deltas of 8 characters) until the test saw the text.
    script = [reply(answer, chunk_chars=8, first_token_delay=0.2, stall_after=6, stall=15)]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent):
        user = fake.user("ada")
        mention = await fake.user_says(user, "tell me about streaming", mention_bot=True)
        (first,) = await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
        # The model is stalled mid-answer: what Discord got is the start of the answer, not all of it.
        shown = content_of(first)
        assert shown and answer.startswith(shown) and len(shown) < len(answer)
        assert int(first.body()["message_reference"]["message_id"]) == int(mention["id"])
        assert first.body()["allowed_mentions"]["parse"] == []
        llm.unstall()

        await fake.wait_for("POST", THREADS)
        (message,) = answers_in(fake, fake.channel_id)
        assert message["content"] == answer.strip()
        assert len(channel_posts(fake, fake.channel_id)) == 1, "one message, edited in place"
        for edit in edits_of(fake, fake.channel_id, message["id"]):
            assert edit.body()["allowed_mentions"]["parse"] == []
        llm.assert_complete()


async def test_edits_of_a_long_streamed_answer_come_at_most_about_once_a_second(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    chunks, pause = 60, 0.05  # three seconds of model time
    answer = ("word " * 400)[: chunks * 8]
    script = [reply(answer, chunk_chars=8, chunk_delay=pause)]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent):
        await fake.user_dms(fake.user("bo"), "a long one please")
        dm = next(iter(fake.dm_channels.values()))
        (posted,) = await fake.wait_for("POST", rf"/channels/{dm}/messages")
        await fake.wait_until(lambda: answers_in(fake, dm)[0]["content"] == answer.strip(), within=15)
        (message,) = answers_in(fake, dm)
        edits = edits_of(fake, dm, message["id"])
        model_seconds = chunks * pause
        assert 2 <= len(edits) <= model_seconds / 1.0 + 1, [round(e.at - posted.at, 2) for e in edits]
        # The live edits (all but the final one) keep the interval; the final answer goes out at once.
        live = [posted, *edits[:-1]]
        gaps = [b.at - a.at for a, b in itertools.pairwise(live)]
        assert all(gap >= 1.0 for gap in gaps), gaps
        llm.assert_complete()


async def test_a_long_answer_moves_to_a_follow_up_before_2000_characters_without_splitting_a_fence_or_a_word(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    code = "\n".join(f"    total += values[{i}]  # keep adding" for i in range(70))
    prose = "Here is the loop you asked for, explained. " * 10
    answer = f"{prose}\n\n```python\n{code}\n```\n\nThat adds them all."
    assert len(answer) > MESSAGE_LIMIT + 500 and len(code) > MESSAGE_LIMIT
    # Stalled near the end: the follow-up message must already be there while the model writes.
    script = [reply(answer, chunk_chars=40, stall_after=len(answer) // 40 - 2, stall=15)]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent) as bot:
        bot.live_edit_every = 0.1
        user = fake.user("cy")
        await fake.user_says(user, "show me the loop", mention_bot=True)
        await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages", count=2)
        llm.unstall()
        await fake.wait_for("POST", THREADS)

        sent = [r for r in fake.requests if r.method in ("POST", "PATCH") and "/messages" in r.path]
        assert all(len(content_of(r)) <= MESSAGE_LIMIT for r in sent)
        first, second = answers_in(fake, fake.channel_id)
        for message in (first, second):
            assert message["content"].count("```") % 2 == 0, "every message closes its fence"
        assert second["content"].startswith("```python\n"), "the fence reopens with its language"
        assert first["content"].count("```") > 0, "the fence starts in the first message"
        # Nothing lost, nothing doubled, no word cut in two.
        words = re.findall(r"\S+", answer)
        shown = re.findall(r"\S+", f"{first['content']}\n{second['content']}")
        assert [w for w in shown if w != "```" and w != "```python"] == [
            w for w in words if w != "```" and w != "```python"
        ]
        assert len(channel_posts(fake, fake.channel_id)) == 2
        llm.assert_complete()


async def test_a_429_on_a_live_edit_is_waited_out_and_no_text_is_lost(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    answer = WORDS * 4
    script = [reply(answer, chunk_chars=8, stall_after=4, stall=15)]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent) as bot:
        bot.live_edit_every = 0.1
        await fake.user_says(fake.user("di"), "go on", mention_bot=True)
        await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
        (message,) = answers_in(fake, fake.channel_id)
        fake.rate_limit_next(
            "PATCH", rf"/channels/{fake.channel_id}/messages/{message['id']}", retry_after=0.3
        )
        llm.unstall()
        await fake.wait_for("POST", THREADS)

        edits = edits_of(fake, fake.channel_id, message["id"])
        assert edits[0].status == 429 and edits[1].status == 200
        assert edits[1].at - edits[0].at >= 0.3
        (final,) = answers_in(fake, fake.channel_id)
        assert final["content"] == answer.strip()
        assert len(channel_posts(fake, fake.channel_id)) == 1
        llm.assert_complete()


# --- tool calls, the one final answer and its button ----------------------------------------------


async def test_tool_calls_show_live_and_the_answer_ends_as_one_message_with_its_tool_results_button(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    gate = asyncio.Event()
    script = [
        Reply(tool_calls=(FakeCall(name="get_environment_status", arguments='{"area_code": "A1001"}'),)),
        reply("The air in A1001 is good (AQI 42).", chunk_chars=6, stall_after=3, stall=15),
    ]
    async with (
        FakeLLMServer(script) as llm,
        agent_for(llm, store, FakeTools(gate=gate)) as agent,
        running_bot(fake, agent) as bot,
    ):
        bot.live_edit_every = 0.1
        await fake.user_says(fake.user("eli"), "air in A1001?", mention_bot=True)
        (running,) = await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
        assert "🔧 calling get_environment_status…" in content_of(running)
        assert not button_ids(running.body())
        gate.set()
        (message,) = answers_in(fake, fake.channel_id)
        # The call is done and the answer starts above its line while the model is still writing.
        await fake.wait_until(
            lambda: any(
                re.search(r"The air.*\n\n-# 🔧 get_environment_status ✓ [\d.]+ m?s", content_of(e), re.S)
                for e in edits_of(fake, fake.channel_id, message["id"])
            )
        )
        llm.unstall()
        await fake.wait_for("POST", THREADS)

        (final,) = answers_in(fake, fake.channel_id)
        tool_line = "-# 🔧 get_environment_status · env ✓ 312 ms"
        assert final["content"] == f"The air in A1001 is good (AQI 42).\n\n{tool_line}"
        (custom_id,) = button_ids(final)
        assert custom_id.startswith("nerve:tools:")
        assert len(channel_posts(fake, fake.channel_id)) == 1, "exactly one answer message"
        with_button = [e for e in edits_of(fake, fake.channel_id, message["id"]) if button_ids(e.body())]
        assert len(with_button) == 1, "the button comes once, with the final answer"

        await fake.click(fake.user("fay"), final, custom_id)
        (callback,) = await fake.wait_for("POST", CALLBACK)
        assert callback.body()["data"]["embeds"][0]["title"] == "🔧 get_environment_status · env"
        llm.assert_complete()


async def test_a_cut_stream_ends_the_shown_answer_with_the_cut_off_note_in_the_same_message(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    answer = WORDS * 2
    # 7 deltas of 8 characters reach people, then the connection drops.
    script = [reply(answer, chunk_chars=8, stall_after=6, stall=15, cut_after=8)]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent):
        await fake.user_says(fake.user("gil"), "tell me", mention_bot=True)
        (first,) = await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages")
        assert answer.startswith(content_of(first)), "the start was shown before the stream broke"
        llm.unstall()
        await fake.wait_for("POST", THREADS)
        (message,) = answers_in(fake, fake.channel_id)
        assert message["content"] == f"{answer[: 7 * 8].rstrip()}\n\n{CUT_OFF_NOTE}"
        assert len(channel_posts(fake, fake.channel_id)) == 1, "the note ends the same message"
        llm.assert_complete()


# --- /ask -----------------------------------------------------------------------------------------


async def test_ask_edits_its_deferred_response_live_then_shows_the_answer_and_opens_a_thread(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    answer = WORDS * 2
    script = [reply(answer, chunk_chars=8, first_token_delay=0.2, stall_after=5, stall=15)]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent):
        interaction = await fake.slash(
            fake.user("hal"), "ask", {"question": "how do answers stream?"}, channel_id=fake.channel_id
        )
        (defer,) = await fake.wait_for("POST", CALLBACK)
        assert defer.json["type"] == 5
        (live,) = await fake.wait_for("PATCH", ORIGINAL)
        shown = content_of(live)
        assert shown and answer.startswith(shown) and len(shown) < len(answer), "edited while stalled"
        assert live.path.split("/")[3] == interaction["token"]
        llm.unstall()

        await fake.wait_for("POST", THREADS)
        answer_id = fake._interactions[interaction["token"]]["original"]
        assert fake.messages[answer_id]["content"] == answer.strip()
        assert not channel_posts(fake, fake.channel_id), "everything went through the interaction"
        assert not fake.find("POST", r"/webhooks/\d+/[^/]+"), "no follow-up for a short answer"
        llm.assert_complete()


async def test_an_ask_whose_token_expired_goes_on_live_as_one_channel_message(
    fake: FakeDiscord, store: SQLiteStore
) -> None:
    answer = WORDS * 2
    script = [reply(answer, chunk_chars=8, first_token_delay=0.2, stall_after=5, stall=15)]
    async with FakeLLMServer(script) as llm, agent_for(llm, store) as agent, running_bot(fake, agent) as bot:
        bot.live_edit_every = 0.1
        interaction = await fake.slash(
            fake.user("ivy"), "ask", {"question": "a slow one"}, channel_id=fake.channel_id
        )
        await fake.wait_for("POST", CALLBACK)
        fake.expire_token(interaction["token"])
        # Still stalled: the answer goes on in the channel while the model writes.
        await fake.wait_until(lambda: bool(with_text(channel_posts(fake, fake.channel_id))))
        (posted,) = with_text(channel_posts(fake, fake.channel_id))
        answer_id = fake._interactions[interaction["token"]]["original"]
        assert int(posted.body()["message_reference"]["message_id"]) == answer_id
        assert answer.startswith(content_of(posted)) and len(content_of(posted)) < len(answer)
        llm.unstall()

        await fake.wait_for("POST", rf"/channels/{fake.channel_id}/messages/{answer_id}/threads")
        (message,) = answers_in(fake, fake.channel_id)[1:]
        assert message["content"] == answer.strip(), "the whole answer, once, in the channel"
        assert len(channel_posts(fake, fake.channel_id)) == 1
        llm.assert_complete()


# --- the live view on its own ---------------------------------------------------------------------


def test_a_new_model_round_drops_the_draft_and_keeps_the_tool_lines() -> None:
    view = LiveView()
    view.record(TurnEvent(kind="text", message="Let me check."), 0.0)
    view.record(TurnEvent(kind="tool_started", message="", tool="lookup", tool_call_id="c1"), 0.0)
    assert view.chunks() == ["Let me check.\n\n-# 🔧 calling lookup…"]
    view.record(TurnEvent(kind="tool_finished", message="", tool="lookup", tool_call_id="c1", ok=False), 1.5)
    view.record(TurnEvent(kind="thinking", message="thinking…"), 1.5)
    assert view.chunks() == ["-# 🔧 lookup ✗ 1.5 s"]
    view.record(TurnEvent(kind="text", message="It failed."), 2.0)
    assert view.chunks() == ["It failed.\n\n-# 🔧 lookup ✗ 1.5 s"]


def test_a_fence_still_open_while_the_model_writes_is_closed_in_the_live_message() -> None:
    assert layout("Code:\n\n```python\nprint(1)", "") == ["Code:\n\n```python\nprint(1)\n```"]


def test_parallel_calls_show_one_line_each_and_a_notice_shows_as_the_status() -> None:
    view = LiveView()
    for call in ("a", "b"):
        view.record(TurnEvent(kind="tool_started", message="", tool=f"tool_{call}", tool_call_id=call), 0.0)
    view.record(TurnEvent(kind="retrying", message="tool_b is rate limited, retrying in 2 s"), 0.1)
    assert view.chunks() == [
        "-# 🔧 calling tool_a…\n-# 🔧 calling tool_b…\n-# ⏳ tool_b is rate limited, retrying in 2 s"
    ]
