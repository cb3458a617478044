"""Limits every surface shares, enforced in the core: the size of a question and turns at once."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.settings import PLATFORMS, Settings
from bot.agent import AgentConfig
from bot.files.intake import file_ids
from bot.runtime import agent_config
from bot.types import ChatMessage, ConversationKey, Incoming, TurnEvent
from bot.types.files import SharedFile
from tests.fakes.llm_server import Reply, reply
from tests.test_slack_harness import core


def incoming(text: str, thread: str = "t1", event_id: str | None = None) -> Incoming:
    key = ConversationKey(platform="terminal", workspace="", channel="local", thread=thread)
    return Incoming(key=key, text=text, user_id="me", event_id=event_id)


async def never_fetched(max_bytes: int) -> bytes:
    raise AssertionError("a refused message's file is not fetched")


def with_file(message: Incoming) -> Incoming:
    """`message` sharing a file, delivered with an id (so its file's id is known beforehand)."""
    shared = SharedFile(name="notes.txt", fetch=never_fetched, size=12, mime="text/plain", ref="notes")
    return replace(message, event_id=message.event_id or "e-file", files=(shared,))


def roles_and_texts(history: list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role, m.content or "") for m in history]


async def test_a_question_over_the_size_limit_is_stored_and_refused_without_a_model_call(
    tmp_path: Path,
) -> None:
    async with core(tmp_path, [], config=AgentConfig(max_question_chars=100)) as c:
        question = incoming("x" * 150)
        answer = await c.agent.reply(question)
        notice = "Your message is 150 characters; the limit is 100. Please shorten it."
        assert answer.text == notice and answer.failed
        assert c.llm.requests == []
        # Nothing the person wrote is lost: the whole message is in the conversation.
        assert roles_and_texts(await c.store.history(question.key)) == [
            ("user", "x" * 150),
            ("assistant", notice),
        ]


async def test_a_refused_question_keeps_its_files_listing_and_ids(tmp_path: Path) -> None:
    async with core(tmp_path, [], config=AgentConfig(max_question_chars=100)) as c:
        question = with_file(incoming("x" * 150))
        await c.agent.reply(question)
        (file_id,) = file_ids(question)
        stored = (await c.store.history(question.key))[0]
        assert stored.files == (file_id,)
        assert stored.content == f"{'x' * 150}\n\n[attached file {file_id}: notes.txt (text/plain, 12 bytes)]"


async def test_a_question_of_a_megabyte_never_reaches_the_model_with_the_default_limit(
    tmp_path: Path,
) -> None:
    async with core(tmp_path, []) as c:
        answer = await c.agent.reply(incoming("é" * 1_000_000))
        assert answer.text == (
            "Your message is 1,000,000 characters; the limit is 20,000. Please shorten it."
        )
        assert c.llm.requests == []


async def test_a_question_exactly_at_the_limit_is_answered(tmp_path: Path) -> None:
    async with core(tmp_path, [reply("fine")], config=AgentConfig(max_question_chars=100)) as c:
        answer = await c.agent.reply(incoming("y" * 100))
        assert answer.text == "fine" and not answer.failed
        assert len(c.llm.requests) == 1


async def test_the_turn_settings_reach_the_agent() -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        nerve_max_question_chars=500,
        nerve_max_concurrent_turns=3,
        nerve_turn_queue=7,
    )
    config = agent_config(settings)
    assert (config.max_question_chars, config.max_concurrent_turns, config.turn_queue) == (500, 3, 7)
    # The front ends' platforms, whose people and advice the turns follow.
    assert config.platforms == PLATFORMS
    defaults = agent_config(Settings(_env_file=None))  # type: ignore[call-arg]
    assert (defaults.max_question_chars, defaults.max_concurrent_turns, defaults.turn_queue) == (
        20_000,
        128,
        100,
    )


class HeldModel:
    """A model endpoint that answers each question only when the test releases it."""

    def __init__(self) -> None:
        self.release: dict[str, asyncio.Event] = {}
        self.arrived = asyncio.Condition()
        self.questions: list[str] = []

    async def __call__(self, body: dict[str, Any]) -> Reply:
        question = str(body["messages"][-1]["content"])
        gate = self.release.setdefault(question, asyncio.Event())
        async with self.arrived:
            self.questions.append(question)
            self.arrived.notify_all()
        await gate.wait()
        return reply(f"answer to {question}")

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(10), self.arrived:
            await self.arrived.wait_for(lambda: len(self.questions) >= count)

    def let_go(self, question: str) -> None:
        self.release.setdefault(question, asyncio.Event()).set()


async def test_a_turn_refused_by_a_full_queue_is_stored_and_told_to_try_again(tmp_path: Path) -> None:
    model = HeldModel()
    async with core(tmp_path, model, config=AgentConfig(max_concurrent_turns=1, turn_queue=0)) as c:
        first = asyncio.create_task(c.agent.reply(incoming("first", thread="a")))
        await model.wait_for(1)
        busy = await c.agent.reply(incoming("second", thread="b"))
        assert busy.text == "I'm busy right now — please try again in a minute." and busy.failed
        assert roles_and_texts(await c.store.history(incoming("", thread="b").key)) == [("user", "second")]
        # A refused message with a file keeps it, named with its id as a turn stores it.
        sharing = with_file(incoming("third", thread="c"))
        await c.agent.reply(sharing)
        (stored,) = await c.store.history(sharing.key)
        assert stored.files == file_ids(sharing) and f"[attached file {stored.files[0]}: notes.txt" in (
            stored.content or ""
        )
        model.let_go("first")
        assert (await asyncio.wait_for(first, 10)).text == "answer to first"
        assert model.questions == ["first"]


async def test_a_waiting_turn_is_told_its_place_in_line_and_answered_after_the_one_before(
    tmp_path: Path,
) -> None:
    model = HeldModel()
    events: list[TurnEvent] = []
    queued = asyncio.Event()

    async def progress(event: TurnEvent) -> None:
        events.append(event)
        if "in line" in event.message:
            queued.set()

    async with core(tmp_path, model, config=AgentConfig(max_concurrent_turns=1, turn_queue=5)) as c:
        first = asyncio.create_task(c.agent.reply(incoming("first", thread="a")))
        await model.wait_for(1)
        second = asyncio.create_task(c.agent.reply(incoming("second", thread="b"), progress))
        async with asyncio.timeout(10):
            await queued.wait()
        assert events[0].kind == "notice" and "number 1 in line" in events[0].message
        assert model.questions == ["first"]
        model.let_go("first")
        model.let_go("second")
        answers = await asyncio.wait_for(asyncio.gather(first, second), 10)
        assert [a.text for a in answers] == ["answer to first", "answer to second"]
        assert model.questions == ["first", "second"]


async def test_turns_waiting_behind_their_own_thread_take_no_slot_from_other_conversations(
    tmp_path: Path,
) -> None:
    model = HeldModel()
    async with core(tmp_path, model, config=AgentConfig(max_concurrent_turns=2, turn_queue=0)) as c:
        first = asyncio.create_task(c.agent.reply(incoming("first", thread="a")))
        await model.wait_for(1)
        # Queued behind "first" in its own thread: it must not take the second slot meanwhile.
        second = asyncio.create_task(c.agent.reply(incoming("second", thread="a")))
        await asyncio.sleep(0)
        other = asyncio.create_task(c.agent.reply(incoming("elsewhere", thread="b")))
        await model.wait_for(2)
        assert model.questions == ["first", "elsewhere"]
        for question in ("first", "second", "elsewhere"):
            model.let_go(question)
        answers = await asyncio.wait_for(asyncio.gather(first, second, other), 10)
        assert [a.text for a in answers] == ["answer to first", "answer to second", "answer to elsewhere"]


async def test_turns_replayed_after_a_restart_wait_for_a_slot_however_many_and_keep_thread_order(
    tmp_path: Path,
) -> None:
    model = HeldModel()
    # Three threads of two messages each, plus one more: seven replays for one slot and one queue place.
    asked = [(f"q{n} in {thread}", thread) for n in (1, 2) for thread in ("a", "b", "c")] + [("q1 in d", "d")]
    async with core(tmp_path, model, config=AgentConfig(max_concurrent_turns=1, turn_queue=1)) as c:
        replays = [
            asyncio.create_task(
                c.agent.reply(replace(incoming(text, thread=thread, event_id=f"Ev{i}"), replayed=True))
            )
            for i, (text, thread) in enumerate(asked)
        ]
        await model.wait_for(1)
        async with asyncio.timeout(10):
            # One turn per thread waits for the slot, the others behind it for their thread.
            # The gate tells nobody when it queues a turn (a refused one ends its task).
            while c.agent.gate.waiting < 3 and not any(task.done() for task in replays):  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        for text, _ in asked:
            model.let_go(text)
        answers = await asyncio.wait_for(asyncio.gather(*replays), 20)
        assert [a.text for a in answers] == [f"answer to {text}" for text, _ in asked]
        assert not any(a.failed for a in answers)
        for thread in ("a", "b", "c"):
            assert [q for q in model.questions if q.endswith(f" in {thread}")] == [
                f"q1 in {thread}",
                f"q2 in {thread}",
            ]
