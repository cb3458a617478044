"""The turn so far, folded once from a turn's events for every platform (`adapters.common.turn_so_far`)."""

from __future__ import annotations

from typing import Any

from adapters.common.turn_so_far import TurnSoFar, percent
from bot.types import Ask, ConversationKey, InputRequest, TurnEvent, TurnEventKind


def _call(kind: TurnEventKind, call_id: str = "c1", message: str = "", **more: Any) -> TurnEvent:
    return TurnEvent(kind=kind, message=message, tool="lookup", tool_call_id=call_id, **more)


def _question() -> Ask:
    key = ConversationKey(platform="terminal", workspace="alice", channel="cli", thread="t")
    request = InputRequest(
        request_id="r1",
        key=key,
        user_id="alice",
        server="asks",
        tools=("lookup",),
        message="Which?",
        mode="url",
    )
    return Ask.of_input(request)


def test_a_new_round_drops_the_draft_and_keeps_the_calls() -> None:
    turn = TurnSoFar()
    assert turn.record(TurnEvent(kind="text", message="Let me "), 0.0)
    assert turn.record(TurnEvent(kind="text", message="check."), 0.0)
    assert turn.record(_call("tool_started", server="notes"), 1.0)
    assert turn.text == "Let me check."
    assert turn.record(TurnEvent(kind="thinking", message="thinking…"), 2.0)
    assert turn.text == "" and list(turn.calls) == ["c1"]
    assert not turn.record(TurnEvent(kind="thinking", message="thinking…"), 2.0), "nothing left to drop"


def test_a_call_runs_reports_progress_and_finishes_once() -> None:
    turn = TurnSoFar()
    turn.record(_call("tool_started", server="notes"), 1.0)
    assert turn.record(_call("tool_progress", message="step 1 of 2", fraction=0.5), 1.2)
    call = turn.calls["c1"]
    assert (call.name, call.server, call.progress, percent(call.fraction)) == (
        "lookup",
        "notes",
        "step 1 of 2",
        " (50%)",
    )
    assert turn.record(_call("tool_finished", ok=True), 1.5)
    assert (call.finished, call.ok) == (1.5, True)
    assert not turn.record(_call("tool_finished", ok=False), 3.0), "a finished call stays as it ended"
    assert not turn.record(_call("tool_progress", message="late"), 3.0)
    assert not turn.record(_call("tool_finished", "unknown", ok=True), 3.0)
    assert (call.finished, call.ok, call.progress) == (1.5, True, "step 1 of 2")
    assert percent(None) == ""


def test_the_newest_status_line_shows_until_words_supersede_it() -> None:
    turn = TurnSoFar()
    turn.record(TurnEvent(kind="retrying", message="rate limited, retrying in 2 s", retry_in=2.0), 0.0)
    assert (turn.status_line, turn.waiting) == ("rate limited, retrying in 2 s", False)
    turn.record(TurnEvent(kind="text", message="Done."), 1.0)
    assert turn.status_line is None


def test_a_question_waits_for_a_person_until_it_ends_and_leaves_a_newer_line_alone() -> None:
    turn = TurnSoFar()
    assert turn.record(TurnEvent(kind="ask", message="Which?", ask=_question()), 0.0)
    assert (turn.status_line, turn.waiting) == ("Which?", True)
    assert turn.record(TurnEvent(kind="ask_done", message="accepted", ask=_question()), 1.0)
    assert (turn.status_line, turn.waiting) == (None, False)
    turn.record(TurnEvent(kind="ask", message="Which?", ask=_question()), 2.0)
    turn.record(TurnEvent(kind="notice", message="queued"), 3.0)
    assert not turn.record(TurnEvent(kind="ask_done", message="expired", ask=_question()), 4.0)
    assert (turn.status_line, turn.waiting) == ("queued", False)
