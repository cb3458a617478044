"""The last line each stdio server wrote to stderr while the doctor started it: a server that will
not start usually says why there, and the report is where the operator is looking.

The lines are read off the `bot.mcp.stderr.<server>` loggers nerve already writes them to, so the
doctor starts servers exactly as nerve does. What reached the log before still does, no more.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

STDERR_LOGGER = "bot.mcp.stderr"
# The repeat of a failed start's quiet lines (`bot.mcp.stderr`): its lines were each seen already.
REPEAT = "last output before it stopped:"


class LastStderrLines(logging.Handler):
    """Keeps each server's newest stderr line, and passes on the records the log would have shown."""

    def __init__(self, shown_from: int) -> None:
        super().__init__(logging.INFO)
        self.last: dict[str, str] = {}
        self._shown_from = shown_from

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if not text.startswith(REPEAT) and text.strip():
            self.last[record.name.removeprefix(f"{STDERR_LOGGER}.")] = text.splitlines()[-1].strip()
        if record.levelno >= self._shown_from:
            logging.getLogger().handle(record)


@contextmanager
def last_stderr_lines() -> Iterator[dict[str, str]]:
    """`with last_stderr_lines() as last:` — `last[server]` is its newest stderr line, once written."""
    logger = logging.getLogger(STDERR_LOGGER)
    handler = LastStderrLines(logger.getEffectiveLevel())
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield handler.last
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
