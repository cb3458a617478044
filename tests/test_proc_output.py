"""The suite's helper processes print lines a SIGKILL cannot cut in two (`tests/proc_output.py`).

Several processes, one after the other, print JSON lines without pause into one pipe, as the kill
test's nerve processes share their harness's; each is SIGKILLed while it prints. Every line the pipe
carries must be one whole JSON value: with `print(..., flush=True)` under `PYTHONUNBUFFERED`, a kill
between the text and its newline glued the next process's first line to the cut one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRINTER = (
    "from tests.proc_output import say_json\n"
    "n = 0\n"
    "while True:\n"
    "    say_json({'pid': __import__('os').getpid(), 'n': n, 'pad': 'x' * 40})\n"
    "    n += 1\n"
)
PROCESSES = 20
LINES_BEFORE_THE_KILL = 200


def test_lines_of_processes_killed_while_printing_are_each_whole() -> None:
    read_end, write_end = os.pipe()
    lines: list[bytes] = []
    seen = threading.Condition()

    def read() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                with seen:
                    lines.append(line)
                    seen.notify_all()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    try:
        for _ in range(PROCESSES):
            printer = subprocess.Popen([sys.executable, "-c", PRINTER], stdout=write_end, env=env, cwd=ROOT)
            with seen:  # it is printing fast: the kill lands mid-stream
                before = len(lines)
                assert seen.wait_for(lambda n=before: len(lines) >= n + LINES_BEFORE_THE_KILL, timeout=60)
            printer.send_signal(signal.SIGKILL)
            assert printer.wait(timeout=60) == -signal.SIGKILL
    finally:
        os.close(write_end)
    reader.join(timeout=60)
    assert not reader.is_alive()
    broken = []
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            broken.append(line)
    assert broken == [], f"{len(broken)} of {len(lines)} lines were cut or glued, e.g. {broken[:2]}"
