"""What the suite's helper processes print for their test to read: one line at a time, each written
whole by one system call.

The kill tests SIGKILL these processes at random moments. `print(text, flush=True)` writes the text
and its newline in two system calls when Python runs unbuffered (`PYTHONUNBUFFERED`, which many
machines set), so a kill between the two left a line without its end, and the next line on the pipe
(another process's, where several share it) was glued to it: the test could not read either. A write
of a short line to a pipe is atomic, so a line is there whole or not at all.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def say_line(text: str) -> None:
    """`text` and its newline on standard output, in one write while it fits a pipe's atomic size."""
    data = (text + "\n").encode()
    out = sys.stdout.fileno()
    sys.stdout.flush()  # anything printed before goes first
    while data:
        data = data[os.write(out, data) :]


def say_json(value: Any) -> None:
    """`value` as one JSON line (`say_line`)."""
    say_line(json.dumps(value))
