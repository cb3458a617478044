"""The stop button across processes: replicas and workers share a thread's turns through the store,
so the `agent_session_stopped` delivery may land in a process that does not run the turn. It is
passed on through the store to that turn alone, which stops as if the button had been pressed where
it runs (same rights, same outcome); a stop meant for no running turn never stops a later one. And a
message stopped while it waited for a free slot is told the truth: it was not kept.

Two bots on one database (SQLite and PostgreSQL), each with a store of its own as two processes
have, served over HTTP by the real bolt app against one Slack fake and one model fake.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from bot.agent import AgentConfig
from bot.types import HELD_TURN, ConversationKey, HeldTurn
from tests.fakes.llm_server import Reply, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID
from tests.fakes.slack_sessions import stop_pressed
from tests.stores import Backend
from tests.surfaces import slack_app
from tests.test_slack_agent_sessions import TOOL, StoppableHost, statuses
from tests.test_slack_approvals import ADMIN, ALICE, BOB, CHANNEL
from tests.test_slack_harness import Rig, event_body, mention, rig

pytestmark = pytest.mark.both_stores


def key_of(root: str, channel: str = CHANNEL) -> ConversationKey:
    return ConversationKey(platform="slack", workspace=TEAM_ID, channel=channel, thread=root)


def other_process(r: Rig, host: StoppableHost, **settings: Any) -> AbstractAsyncContextManager[Rig]:
    """A second bot on `r`'s database, as another replica: a store of its own, turns shared."""
    return slack_app(r, host, AgentConfig(), time.time, shared_turns=True, **settings)


async def until(condition: Callable[[], Awaitable[bool]], within: float = 15.0) -> None:
    """Wait (bounded) until `condition` holds: rows another process changes, looked at every 20 ms."""
    async with asyncio.timeout(within):
        while not await condition():  # noqa: ASYNC110  (rows: nothing here to wait on)
            await asyncio.sleep(0.02)


async def no_stop_requests(backend: Backend) -> bool:
    return not await backend.rows("SELECT turn FROM turn_stops")


async def started(host: StoppableHost) -> None:
    async with asyncio.timeout(15):
        await host.started.wait()


async def test_a_stop_pressed_in_another_process_stops_the_turn_there_and_keeps_the_message(
    tmp_path: Path, store_backend: Backend
) -> None:
    slow = StoppableHost()
    script: list[Reply] = [tool_reply((TOOL, "{}"))]
    async with (
        rig(tmp_path, script, host=slow, backend=store_backend, shared_turns=True) as a,
        other_process(a, slow) as b,
    ):
        root = "1600000000.500100"
        await a.deliver(mention(f"<@{BOT_USER_ID}> look it up", ts=root))
        await started(slow)
        assert a.bot._turns.stops.working(key_of(root)) == 1 and b.bot._turns.stops.working(key_of(root)) == 0

        pressed = time.monotonic()
        assert await b.deliver(event_body(stop_pressed(ALICE, CHANNEL, root, [])["event"])) == 200
        await b.settle()  # the stop was taken by the process running the turn
        await a.settle()
        took = time.monotonic() - pressed

        assert slow.cancelled, "the running call was cancelled"
        assert took < 5.0, f"the stop took {took:.2f} s to reach the other process"
        assert statuses(a, root) == ["processing", "active"]
        assert "Stopped" in a.slack.thread(CHANNEL, root)[-1].text
        assert "is kept" in a.slack.thread(CHANNEL, root)[-1].text
        kept = [m.content for m in await a.store.history(key_of(root)) if m.role == "user"]
        assert kept == ["look it up"], "the person's message stays stored"
        assert await no_stop_requests(store_backend), "the request was deleted once taken"


async def test_across_processes_only_the_asker_or_an_admin_may_stop_a_turn(
    tmp_path: Path, store_backend: Backend
) -> None:
    slow = StoppableHost()
    script: list[Reply] = [tool_reply((TOOL, "{}"))]
    async with (
        rig(tmp_path, script, host=slow, backend=store_backend, shared_turns=True, nerve_admins=ADMIN) as a,
        other_process(a, slow, nerve_admins=ADMIN) as b,
    ):
        root = "1600000000.500200"
        await a.deliver(mention(f"<@{BOT_USER_ID}> look it up", ts=root))
        await started(slow)

        # Someone else in the channel, through the other process: the turn goes on, still working.
        assert await b.deliver(event_body(stop_pressed(BOB, CHANNEL, root, [])["event"])) == 200
        await b.settle()  # taken by the running process (else it would have been dropped after a while)
        assert await no_stop_requests(store_backend)
        assert not slow.cancelled and statuses(a, root) == ["processing"]

        # An admin, through the other process, may stop anyone's turn.
        assert await b.deliver(event_body(stop_pressed(ADMIN, CHANNEL, root, [])["event"])) == 200
        await b.settle()
        await a.settle()
        assert slow.cancelled
        assert statuses(a, root) == ["processing", "active"]
        assert "Stopped" in a.slack.thread(CHANNEL, root)[-1].text


async def test_a_stop_pressed_where_nothing_runs_never_stops_a_later_turn(
    tmp_path: Path, store_backend: Backend
) -> None:
    script: list[Reply] = [reply("answered all the same")]
    async with (
        rig(tmp_path, script, backend=store_backend, shared_turns=True) as a,
        other_process(a, StoppableHost()) as b,
    ):
        root = "1600000000.500300"
        assert await b.deliver(event_body(stop_pressed(ALICE, CHANNEL, root, [])["event"])) == 200
        await b.settle()
        # Nothing ran anywhere: the session leaves `processing`, and nothing is kept for later.
        assert statuses(a, root) == ["active"]
        assert await no_stop_requests(store_backend)

        await a.deliver(mention(f"<@{BOT_USER_ID}> and now?", ts="1600000000.500301", thread_ts=root))
        await a.settle()
        assert a.slack.thread(CHANNEL, root)[-1].text == "answered all the same"
        assert statuses(a, root)[-1] == "active"


async def test_a_stop_request_names_one_turn_and_outlives_it_for_no_other(store_backend: Backend) -> None:
    first_process, second_process = await store_backend.open(), await store_backend.open()
    key = key_of("1600000000.500400")
    try:
        assert await second_process.request_stop(key, ALICE) is None, "no turn holds the thread"
        held = HeldTurn(key)
        token = HELD_TURN.set(held)
        try:
            async with first_process.turn_lock.hold(key):
                turn = held.turn
                assert turn is not None
                # The other process sees which turn holds the thread, and asks that one to stop.
                assert await second_process.request_stop(key, ALICE) == turn
                assert await first_process.stop_pending(turn)
            assert held.turn is None
            # The turn ended before it looked: the next turn of the thread is another one.
            async with first_process.turn_lock.hold(key):
                later = held.turn
                assert later is not None and later != turn
                assert await first_process.stops_asked(later) == []
        finally:
            HELD_TURN.reset(token)
        assert await first_process.stops_asked(turn) == [ALICE]  # read once, then gone
        assert not await first_process.stop_pending(turn)
    finally:
        await first_process.close()
        await second_process.close()


async def test_a_message_stopped_while_it_waits_for_a_free_slot_is_told_it_was_not_kept(
    tmp_path: Path, store_backend: Backend
) -> None:
    slow = StoppableHost()
    script: list[Reply] = [tool_reply((TOOL, "{}"))]
    config = AgentConfig(max_concurrent_turns=1, turn_queue=5)
    async with rig(tmp_path, script, host=slow, backend=store_backend, config=config) as r:
        busy, queued = "1600000000.500500", "1600000000.500600"
        await r.deliver(mention(f"<@{BOT_USER_ID}> look it up", ts=busy))
        await started(slow)
        await r.deliver(mention(f"<@{BOT_USER_ID}> my question", ts=queued))

        async def waiting() -> bool:
            return r.agent.gate.waiting == 1 and bool(r.slack.thread(CHANNEL, queued))

        await until(waiting)  # it waits for the slot the first turn holds, its place shown
        await r.deliver(event_body(stop_pressed(ALICE, CHANNEL, queued, [])["event"]))

        async def told() -> bool:
            stopped = "Stopped" in r.slack.thread(CHANNEL, queued)[-1].text
            return stopped and statuses(r, queued)[-1] == "active"

        await until(told)
        said = r.slack.thread(CHANNEL, queued)[-1].text
        assert "not kept" in said and "is kept" not in said, said
        assert await r.store.history(key_of(queued)) == [], "nothing of it was stored"
        assert not slow.cancelled, "the turn holding the slot goes on"

        await r.deliver(event_body(stop_pressed(ALICE, CHANNEL, busy, [])["event"]))
        await r.settle()
        assert slow.cancelled and "is kept" in r.slack.thread(CHANNEL, busy)[-1].text
