"""A pipe for a stdio server's stderr, read into our log (S14), never into a tool result: it is the
server's own text (paths, keys), and would interleave with the terminal UI."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections import deque
from typing import TextIO

TAIL_LINES = 5
MAX_LINE = 4000
_SERIOUS = re.compile(r"\b(ERROR|CRITICAL|FATAL|Traceback|\w+Error)\b")


class StderrTap:
    """One pipe per server process: the child writes `writer`, `pump()` reads the other end."""

    def __init__(self, server: str) -> None:
        read_fd, write_fd = os.pipe()
        self._read_fd: int | None = read_fd
        self.writer: TextIO = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self.tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._quiet: deque[str] = deque(maxlen=TAIL_LINES)
        self._log = logging.getLogger("bot.mcp.stderr").getChild(server)

    def close_writer(self) -> None:
        """Drop our copy of the write end once the child holds its own, so its exit reads as EOF."""
        self.writer.close()  # a no-op once closed

    def close(self) -> None:
        """Release both ends; for a pump that never ran."""
        self.close_writer()
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None

    async def pump(self) -> None:
        """Log lines until the child and everyone sharing the pipe have closed it."""
        assert self._read_fd is not None, "pumped once, before close()"
        pipe = os.fdopen(self._read_fd, "rb", buffering=0)
        self._read_fd = None
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        pending = b""
        try:
            while chunk := await reader.read(65536):
                *lines, pending = (pending + chunk).split(b"\n")
                for line in lines:
                    self._emit(line)
                if len(pending) > MAX_LINE:
                    self._emit(pending)
                    pending = b""
            if pending:
                self._emit(pending)
        finally:
            transport.close()

    def _emit(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip()[:MAX_LINE]
        if not line.strip():
            return
        self.tail.append(line)
        if _SERIOUS.search(line):
            self._log.warning("%s", line)
        else:
            self._quiet.append(line)
            self._log.info("%s", line)

    def report_failed_start(self) -> None:
        """Repeat the last lines logged at INFO at WARNING: the cause of a failed start is often one."""
        if self._quiet:
            self._log.warning("last output before it stopped:\n%s", "\n".join(self._quiet))
