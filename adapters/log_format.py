"""Where the log goes, how its lines look, and what they may never show.

The interactive chat logs to `NERVE_LOG_FILE` (stderr with `-v`): libraries and servers log whenever
they like, which would land between its turns. Token-shaped text and every secret setting become
`[hidden]`, tracebacks included: libraries quote URLs and headers, and a log has more readers than a
key should.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import SecretStr
from pydantic_settings import BaseSettings

from adapters.doctor.report import HIDDEN, Redactor
from bot.errors import ConfigError
from bot.model.models import key_values
from bot.observe.log_context import current_server, current_turn

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

LogFormat = Literal["text", "json"]

# What tokens and keys look like, whoever's they are: a secret nerve was not given can still pass
# through a log line (a server's own key in its error, a header in a library's debug line).
_SECRET_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    # Slack bot, user, app-level, configuration and refresh tokens (rotated ones are `xoxe.xoxp-…`).
    (re.compile(r"\b(?:xoxe\.)?(?:xox[a-z]|xapp)-[A-Za-z0-9-]{8,}"), HIDDEN),
    # OpenAI keys: `sk-…`, `sk-proj-…`, `sk-svcacct-…`.
    (re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"), HIDDEN),
    # Discord bot tokens: the bot's id, a timestamp and an HMAC, each base64, joined by dots.
    (re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,}"), HIDDEN),
    # `Authorization: Bearer …`, whatever the token looks like.
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{HIDDEN}"),
)


def hide_secret_shapes(text: str) -> str:
    for pattern, replacement in _SECRET_SHAPES:
        text = pattern.sub(replacement, text)
    return text


def settings_secrets(settings: BaseSettings) -> list[str]:
    """Every secret setting's value, present ones and future ones, and the keys the models list names
    (NERVE_MODELS, or the servers file's `models`): read at start-up, before any line is logged."""
    found = [
        value.get_secret_value()
        for name in type(settings).model_fields
        if isinstance(value := getattr(settings, name), SecretStr)
    ]
    servers_file = getattr(settings, "nerve_mcp_config", None)
    file_keys = servers_file_keys(servers_file) if isinstance(servers_file, Path) else []
    return found + key_values(getattr(settings, "nerve_models", None)) + file_keys


def servers_file_keys(path: Path) -> list[str]:
    """The keys the servers file's `models` list names by variable. Read leniently: a file missing
    or wrong names none here, and the command that needs it says what is wrong."""
    try:
        raw = json.loads(path.expanduser().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return key_values(raw.get("models")) if isinstance(raw, dict) else []


# The fields a log search can filter on, in the order a JSON line gives them.
SEARCH_FIELDS = ("event", "server", "conversation", "turn")


class TurnFields(logging.Filter):
    """Notes on a record its conversation and turn, its MCP server (given, or the one whose
    connection ran it) and event name; a handler's filter runs where the line was logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        turn = current_turn()
        record.conversation = turn.conversation if turn is not None else None
        record.turn = turn.id if turn is not None else None
        record.server = getattr(record, "server", None) or current_server()
        record.event = getattr(record, "event", None)
        return True


class HidingFormatter(logging.Formatter):
    def __init__(self, hide: Callable[[str], str]) -> None:
        super().__init__(FORMAT)
        self._hide = hide


class TextFormatter(HidingFormatter):
    """The usual line, ` [turn=…]` inside a turn, secrets hidden (the record is left to other handlers)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        turn = getattr(record, "turn", None)
        return f"{line} [turn={turn}]" if turn else line

    def format(self, record: logging.LogRecord) -> str:
        return self._hide(super().format(record))


class JsonFormatter(HidingFormatter):
    """One JSON object per line, ASCII only so a line never breaks, every field with secrets hidden."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, str] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self._hide(record.getMessage()),
        }
        entry |= {
            name: self._hide(str(value)) for name in SEARCH_FIELDS if (value := getattr(record, name, None))
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = self._hide(record.exc_text)
        if record.stack_info:
            entry["stack"] = self._hide(self.formatStack(record.stack_info))
        return json.dumps(entry)


def dress(handler: logging.Handler, log_format: LogFormat, secrets: Iterable[str] = ()) -> None:
    known = Redactor(secrets)
    formatter = JsonFormatter if log_format == "json" else TextFormatter
    handler.setFormatter(formatter(lambda text: hide_secret_shapes(known(text))))
    handler.addFilter(TurnFields())


def install(log_format: LogFormat, secrets: Iterable[str] = ()) -> None:
    """Dress every handler of the root logger: a logger's filters do not see its children's records."""
    secrets = list(secrets)
    for handler in logging.getLogger().handlers:
        dress(handler, log_format, secrets)


class ChatLog(logging.FileHandler):
    """The chat's log file, opened at the first record, remembering whether a warning was written."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8", delay=True)
        self._warned = False
        self._told = False

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        self._warned = self._warned or record.levelno >= logging.WARNING

    def notice(self) -> str | None:
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
