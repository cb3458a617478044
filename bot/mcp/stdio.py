"""A stdio server's connection: the SDK's process handling, with a reader that survives what the
server writes (the SDK's strict one leaves every later call to time out after one bad line) and a
stop that is over within about a second."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp_types
from anyio.abc import Process
from mcp.client.stdio import (
    _aclose_all,
    _close_pipe,
    _close_subprocess_transport,
    _create_platform_compatible_process,
    _drain_stdout,
    _get_executable_command,
    _wait_for_process_exit,
    get_default_environment,
)
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.os.win32.utilities import ServerProcess, close_process_job, terminate_windows_process_tree
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import INTERNAL_ERROR

from bot.mcp.server_config import ServerConfig
from bot.observe.log_context import fields
from bot.observe.log_throttle import LogThrottle, held_back

logger = logging.getLogger(__name__)

# Seconds a server has to exit once its stdin closed, then after SIGTERM, then for the kill to be seen.
EXIT_AFTER_EOF = 0.5
EXIT_AFTER_TERM = 0.25
KILL_REAP = 0.2
# Time for messages already accepted to reach the server before its stdin closes.
WRITER_FLUSH = 0.2
# Seconds between two warnings of one kind about one server's output.
WARN_EVERY = 10.0
# Characters of an unreadable line quoted in the log: enough to recognise it, never a flood.
QUOTED = 60

_SURROGATE = re.compile("[\ud800-\udfff]")
# The id of a message, when it comes before any nested object (where an "id" may be anything).
_TOP_LEVEL_ID = re.compile(r'^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?\d+|"[^"\\]*")')


class LineReader:
    """Turns one server's stdout lines into messages for the session, saying what it had to mend."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._throttle = LogThrottle(WARN_EVERY)

    def read(self, raw: bytes) -> SessionMessage | None:
        """The message on `raw` (one line without its newline); None for a line to skip."""
        if not raw.strip():
            return None
        try:
            text = raw.decode("utf-8")
            mended: list[str] = []
        except UnicodeDecodeError:
            text = raw.decode("utf-8", errors="replace")
            mended = ["is not valid UTF-8"]
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError:
            return self._salvage(text, mended, len(raw))
        if mended:
            self._warn("utf-8", mended, "read it with replacement characters", text, len(raw))
        return SessionMessage(message)

    def _salvage(self, text: str, mended: list[str], size: int) -> SessionMessage | None:
        """A line pydantic refused: lone surrogates are mended, an unreadable answer fails its request."""
        try:
            data: Any = json.loads(text)
        except (ValueError, RecursionError) as exc:
            at = f" ({exc.msg} at column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
            return self._unreadable(text, [*mended, f"is not JSON{at}"], _id_in_text(text), size)
        # Lone surrogates (`\\ud800`), which pydantic refuses, each replaced by U+FFFD.
        dumped = json.dumps(data, ensure_ascii=False)
        if _SURROGATE.search(dumped):
            mended = [*mended, "holds lone surrogates"]
            data = json.loads(_SURROGATE.sub("\ufffd", dumped))
        try:
            message = mcp_types.jsonrpc_message_adapter.validate_python(data, by_name=False)
        except ValueError:
            return self._unreadable(text, [*mended, "is not a JSON-RPC message"], _answered(data), size)
        self._warn("surrogates", mended, "read it with replacement characters", text, size)
        return SessionMessage(message)

    def _unreadable(
        self, text: str, problems: list[str], request_id: int | str | None, size: int
    ) -> SessionMessage | None:
        if request_id is None:
            self._warn("noise", problems, "ignored it", text, size)
            return None
        self._warn("answer", problems, f"its call (request {request_id}) failed at once", text, size)
        error = mcp_types.ErrorData(
            code=INTERNAL_ERROR, message=f"its answer could not be read: the line {' and '.join(problems)}"
        )
        return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))

    def _warn(self, kind: str, problems: list[str], action: str, text: str, size: int) -> None:
        if (held := self._throttle.allow(kind)) is None:
            return
        quoted = ascii(text[:QUOTED]) + ("..." if len(text) > QUOTED else "")
        logger.warning(
            "MCP server %r wrote a line that %s (%d bytes, starting %s): %s%s",
            self.server,
            " and ".join(problems),
            size,
            quoted,
            action,
            held_back(held),
            extra=fields("mcp_unreadable_output", server=self.server),
        )


def _answered(data: Any) -> int | str | None:
    """The id of the request a message answers (it has an id and no method), else None."""
    if not isinstance(data, dict) or "method" in data:
        return None
    found = data.get("id")
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None


def _id_in_text(text: str) -> int | str | None:
    """The id of a line that is not JSON, when it is plainly there (best effort, top level only)."""
    if (found := _TOP_LEVEL_ID.match(text)) is None:
        return None
    value = found.group(1)
    return value[1:-1] if value.startswith('"') else int(value)


@asynccontextmanager
async def stdio_transport(
    config: ServerConfig, *, server: str, errlog: TextIO, started: Process | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's `stdio_client`, over the process `started` for it already if any (`early_start`)."""
    assert config.command is not None
    process: ServerProcess = (
        started
        if started is not None
        else await _create_platform_compatible_process(
            command=await _get_executable_command(config.command),
            args=config.args,
            env=server_environment(config.env),
            errlog=errlog,
            cwd=config.cwd,
        )
    )
    # No awaits until the task group is entered: a cancellation in the gap would leak the process.
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    lines = LineReader(server)
    shutting_down = False
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout, "the server is started with pipes"
        try:
            # The session's stream ends with this block, whatever ends the reading: the link then
            # restarts the server instead of waiting on a reader that stopped.
            async with read_stream_writer:
                pending = b""
                async for chunk in process.stdout:
                    *complete, pending = (pending + chunk).split(b"\n")
                    for raw in complete:
                        if (message := lines.read(raw)) is not None:
                            await read_stream_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session or our own shutdown closed a stream under the read
        except Exception as exc:  # a bug here must end the session, not wedge it
            if not (isinstance(exc, OSError) and shutting_down):
                why = str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
                logger.warning(
                    "MCP server %r: reading its output failed (%s); restarting it",
                    server,
                    why,
                    extra=fields("mcp_output_failed", server=server),
                )
        finally:
            # A server blocked writing its stdout cannot read its stdin's end: keep reading.
            await _drain_stdout(process)

    async def stdin_writer() -> None:
        assert process.stdin, "the server is started with pipes"
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    line = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((line + "\n").encode("utf-8", errors="replace"))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may still run: end the session's stream so no request waits forever.
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(WRITER_FLUSH):
            await writer_done.wait()
        await stop_server(process, server)
        await _aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(stdout_reader)
        group.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            # Bounded, and finished even when the caller is cancelled: no server is left behind.
            with anyio.CancelScope(shield=True):
                await shutdown()
            group.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


def server_environment(env: Mapping[str, str]) -> dict[str, str]:
    """What a stdio server's process gets: the SDK's inherited variables and the entry's own."""
    return get_default_environment() | dict(env)


async def stop_server(process: ServerProcess, server: str) -> None:
    """Close stdin, SIGTERM the process group, then SIGKILL: over in about a second (the SDK: 4 s)."""
    assert process.stdin and process.stdout, "the server is started with pipes"
    await _close_pipe(process.stdin)
    if not await _wait_for_process_exit(process, EXIT_AFTER_EOF):
        logger.info(
            "MCP server %r did not exit within %g s of its input closing; terminating it",
            server,
            EXIT_AFTER_EOF,
            extra=fields("mcp_server_terminated", server=server),
        )
        if sys.platform == "win32":  # pragma: no cover
            await terminate_windows_process_tree(process)
        else:
            assert isinstance(process, Process)
            await terminate_posix_process_tree(process, EXIT_AFTER_TERM)
        if not await _wait_for_process_exit(process, KILL_REAP):
            logger.warning(
                "MCP server %r (process %d) is still alive after SIGKILL; leaving it",
                server,
                process.pid,
                extra=fields("mcp_server_unkillable", server=server),
            )
    close_process_job(process)
    await _close_pipe(process.stdout)
    _close_subprocess_transport(process)
