"""SIGKILL of `nerve slack` at random moments, 10 times, with deliveries flowing: nothing Slack got a
200 for is lost or answered twice, no round is half-written, the database stays whole, and an
approval and a tool's question to the person (an elicitation) parked before the kills are answered
after them.

The scenario is `bench/kill_restart.py` (a real `python -m bot slack` process in HTTP mode, the fake
Slack and model, real stdio MCP servers); `make bench` runs it with 100 kills.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from bench.kill_restart import half_written_rounds, integrity, kill_restart
from bot.store.sqlite import SQLiteStore
from bot.types import ChatMessage, ConversationKey, ToolCall
from tests.fakes.llm_server import reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import core, mention, settings_for, sign
from tests.test_slack_runner import running

KILLS = 10
SEED = 13


async def test_sigkill_at_random_moments_loses_and_doubles_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    figures = await kill_restart(tmp_path, kills=KILLS, seed=SEED, report=lines.append)
    shown = "\n".join(lines) + f"\n{figures}"

    assert figures["kills"] == KILLS
    assert figures["questions"] >= 20, shown  # deliveries really flowed between the kills
    assert figures["deliveries_not_acked"] > 0, "no kill landed while deliveries were in flight"
    assert figures["acked"] == figures["questions"], shown
    assert figures["integrity_check"] == "ok", shown
    assert figures["lost"] == 0, shown
    assert figures["told_busy"] == 0, shown
    assert figures["duplicated"] == 0, shown
    assert figures["misplaced"] == 0, shown
    assert figures["half_written_rounds"] == 0, shown
    assert figures["unfinished_inbox_entries"] == 0, shown
    assert figures["approval_click_status"] == 200, shown
    assert figures["approval_answered_after_kills"], shown
    assert (figures["approved_tool_runs"], figures["note_lines_added"]) == (1, 1), shown
    assert (figures["question_click_status"], figures["question_submit_status"]) == (200, 200), shown
    assert figures["question_answered_after_kills"], shown
    assert figures["question_answers_posted"] == 1, shown
    assert figures["asked_tool_runs"] == 1, shown
    assert figures["asked_tool_got_the_answer"], shown
    assert figures["mcp_servers_left_running"] == 0, shown
    assert figures["last_exit_code"] == 0, shown


async def test_the_round_check_finds_a_call_stored_without_its_result(tmp_path: Path) -> None:
    """The transcript check above can fail: a round stored without one of its results is found."""
    key = ConversationKey(platform="slack", workspace="T", channel="C", thread="1.0")
    calls = (
        ToolCall(id="c1", name="read_note", arguments="{}"),
        ToolCall(id="c2", name="peek", arguments="{}"),
    )
    async with await SQLiteStore.open(tmp_path / "nerve.db") as store:
        await store.append(key, [ChatMessage(role="user", content="hi")])
        await store.append(
            key,
            [
                ChatMessage(role="assistant", tool_calls=calls),
                ChatMessage(role="tool", content="ok", tool_call_id="c1", name="read_note"),
            ],
        )
        await store.append(key, [ChatMessage(role="assistant", content="done")])
    assert integrity(tmp_path / "nerve.db") == "ok"
    assert half_written_rounds(tmp_path / "nerve.db") == ["conversation 1: calls ['c2'] have no result"]


async def test_an_answer_posted_just_before_the_process_died_is_not_posted_again(tmp_path: Path) -> None:
    root = "1600000000.990001"
    async with core(tmp_path, [reply("the answer"), reply("a second answer")], strict=False) as c:
        settings = settings_for(c.slack)
        finish = c.inbox.finish_event

        async def dies_before_recording(platform: str, event_id: str) -> None:
            await asyncio.Event().wait()  # the process is gone: nothing after this runs

        c.inbox.finish_event = dies_before_recording  # type: ignore[method-assign]
        async with running(c.agent, settings) as url, aiohttp.ClientSession() as http:
            body = json.dumps(mention(f"<@{BOT_USER_ID}> hi", channel="C0DIES", ts=root))
            async with http.post(url, data=body, headers=sign(body)) as response:
                assert response.status == 200
            await c.slack.wait_for(lambda s: "the answer" in [p.text for p in s.thread("C0DIES", root)])
        c.inbox.finish_event = finish  # type: ignore[method-assign]

        async with running(c.agent, settings):  # the next start answers what was left unfinished
            await c.inbox.wait_finished(json.loads(body)["event_id"], within=30)
        assert [p.text for p in c.slack.thread("C0DIES", root)] == ["the answer"]
