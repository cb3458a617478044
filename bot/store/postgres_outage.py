"""A database outage in the log: one line when PostgreSQL goes, one a minute while it stays away, one
when it is back, instead of the libraries' own lines.

psycopg_pool logs every attempt of every pool, and procrastinate each failure with a traceback,
burying the one fact an operator needs. procrastinate's lines, which may come long after the failure
they report, are only dropped; psycopg_pool's failed attempts and nerve's own start an outage."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime

import psycopg
from procrastinate.exceptions import ConnectorException

logger = logging.getLogger(__name__)

# While the database stays away, a line saying so this often.
REMINDER_SECONDS = 60.0
# The libraries' loggers whose lines about an unreachable database are replaced.
LIBRARY_LOGGERS = (
    "psycopg.pool",
    "procrastinate",
    "procrastinate.worker",
    "procrastinate.utils",
    "procrastinate.manager",
    "procrastinate.psycopg_connector",
    "procrastinate.job_manager",
)
_POOL_LINES = ("error connecting in", "reconnection attempt in pool")


def unreachable_reason(exc: BaseException | None) -> str | None:
    """The first line of a failure to reach the database, following the causes; None if it is not one."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, psycopg.OperationalError) and not isinstance(exc, psycopg.errors.QueryCanceled):
            text = str(exc).strip()
            return text.splitlines()[0] if text else type(exc).__name__
        if isinstance(exc, ConnectorException) and exc.__cause__ is None:
            return "database error"
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class OutageLog(logging.Filter):
    """Collapses the lines of a database outage into three kinds of line of its own (above)."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time
    ) -> None:
        super().__init__()
        self._clock = clock
        self._wall = wall
        self._since: float | None = None  # monotonic time the outage began
        self._since_wall = 0.0
        self._last_said = 0.0
        self._held_back = 0
        # How many outages have ended: work that began before one ended may report its failure late.
        self.ended = 0

    @property
    def unreachable(self) -> bool:
        return self._since is not None

    def filter(self, record: logging.LogRecord) -> bool:
        reason = self._reason_of(record)
        if reason is None:
            return True
        if record.name == "psycopg.pool":
            self.unreachable_now(reason)  # a connection attempt that failed just now
        elif self._since is not None:
            # procrastinate may log a failure long after it happened (a stopped worker reports its
            # listener's end): counted, but it neither starts an outage nor says one is going on.
            self._held_back += 1
        return False

    def unreachable_now(self, reason: str) -> None:
        """The database could not be reached: say so if this is news, or if a minute passed."""
        now = self._clock()
        if self._since is None:
            self._since, self._since_wall, self._last_said, self._held_back = now, self._wall(), now, 0
            logger.warning("the database is unreachable (%s); nerve keeps retrying", reason)
            return
        self._held_back += 1
        if now - self._last_said >= REMINDER_SECONDS:
            logger.warning(
                "the database is still unreachable, since %s (%.0f s; %d similar line(s) held back);"
                " nerve keeps retrying",
                self._at(),
                now - self._since,
                self._held_back,
            )
            self._last_said, self._held_back = now, 0

    def reachable(self) -> None:
        """A connection to the database succeeded: the end of the outage, if there was one."""
        if self._since is None:
            return
        lasted = self._clock() - self._since
        logger.warning(
            "the database is reachable again after %.0f s (unreachable since %s)", lasted, self._at()
        )
        self._since = None
        self.ended += 1

    def _at(self) -> str:
        return datetime.fromtimestamp(self._since_wall, UTC).strftime("%H:%M:%S UTC")

    @staticmethod
    def _reason_of(record: logging.LogRecord) -> str | None:
        if record.name == "psycopg.pool":
            message = record.getMessage()
            if not message.startswith(_POOL_LINES):
                return None
            return message.split(": ", 1)[1].strip().splitlines()[0] if ": " in message else message
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None and isinstance(record.args, tuple):
            exc = next((a for a in record.args if isinstance(a, BaseException)), None)
        if exc is None and "ConnectorException" in record.getMessage():
            return "database error"
        return unreachable_reason(exc)


OUTAGE = OutageLog()


def install() -> None:
    """Replace the libraries' outage lines with `OUTAGE`'s (idempotent)."""
    for name in LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        if OUTAGE not in library.filters:
            library.addFilter(OUTAGE)
