"""Where the log goes: stderr, except in the interactive chat, where it goes to a file.

Libraries and servers log whenever they like, which would land between a chat's turns; the chat
writes to `NERVE_LOG_FILE` (stderr with `-v`) and says once, between turns, when to look.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from bot.errors import ConfigError

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class ChatLog(logging.FileHandler):
    """The chat's log file, opened at the first record, remembering whether a warning was written."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)
        self._warned = False
        self._told = False

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if record.levelno >= logging.WARNING:
            self._warned = True

    def notice(self) -> str | None:
        """Where the log is, once, after the first warning; otherwise None."""
        if not self._warned or self._told:
            return None
        self._told = True
        return f"(warnings were written to the log: {self.baseFilename})"


def log_to_stderr(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr, format=FORMAT, force=True)


def log_to_file(level: str, path: Path) -> ChatLog:
    """Send every log record, Python warnings included, to `path`; fail now if it cannot be written."""
    target = path.expanduser()
    writable = os.access(target if target.exists() else target.parent, os.W_OK)
    if target.is_dir() or not writable:
        raise ConfigError(
            f"cannot write the chat log {target}: set NERVE_LOG_FILE to a writable file, "
            "or use -v to log to stderr"
        )
    handler = ChatLog(target)
    handler.setFormatter(logging.Formatter(FORMAT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    logging.captureWarnings(True)
    return handler
