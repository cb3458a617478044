"""Three `nerve slack` processes on one PostgreSQL answer 200 questions in 40 threads exactly once and
in order, with every question delivered twice to two different processes and one process SIGKILLed
part-way and started again (`bench/replicas.py`, which `make bench` also runs with throughput)."""

from __future__ import annotations

from pathlib import Path

from bench.replicas import exactly_once


async def test_three_processes_answer_every_question_once_in_order_through_a_kill(tmp_path: Path) -> None:
    lines: list[str] = []
    figures = await exactly_once(tmp_path, replicas=3, threads=40, per_thread=5, report=lines.append)
    shown = "\n".join(lines) + f"\n{figures}"

    assert figures["questions"] == 200
    assert figures["deliveries"] >= 400, shown  # each question went to two processes
    assert figures["acked_unanswered_at_kill"] > 0, "the kill met no question in flight: " + shown
    assert figures["answered"] == 200, shown
    assert figures["lost"] == 0, shown
    assert figures["duplicated"] == 0, shown
    assert figures["out_of_order"] == 0, shown
    assert figures["stray_messages"] == 0, shown
    assert figures["exit_codes"] == [0, 0, 0], shown
