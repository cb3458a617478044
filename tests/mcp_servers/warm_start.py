"""Warm starts for the MCP servers the suite starts hundreds of times (`trust`, `asks`, `testkit`, and
nerve's own two through `tests.mcp_servers.env_query` and `geo_simulator`).

Most of a Python MCP server's start is importing the SDK and its protocol models (about 0.6 s of CPU
on a 2-core machine); the approval and form tests start one or two servers per test, so the suite
spent minutes of CPU importing the same modules again. A test run starts one *fork server* that has
imported them; `python -m tests.mcp_servers.trust …` still starts a real process, which hands its own
stdin, stdout and stderr, its arguments, folder and environment to the fork server and waits. The
fork server forks a child that runs the server module as `__main__` on exactly those file
descriptors, so the host talks to a real server process over real stdio pipes, as before; only the
imports were done once.

The started process stays the server's stand-in for its host: a signal it gets is passed on to the
server, it exits as the server exits (with its code, or by the same signal), and when it is killed
the fork server kills the server. Without a fork server (a test run on its own, another machine) the
module starts the usual way.

The fork server is found through the environment variable `MCP_TEST_FORK_SERVER` of the nearest
process above the server that has it: a host's stdio transport passes servers only a minimal
environment (the MCP SDK's default), so the variable is read from `/proc/<ancestor>/environ`.

The same goes for the `nerve` command line itself (`tests.warm_nerve`, which runs `python -m bot`):
importing nerve, the model client and the MCP SDK is most of the CPU a short `nerve ask` or
`nerve tools` spends. A warm module may name in `PRELOAD` what the fork server imports for it
beforehand. The server gets standard streams made as Python makes them at start-up (line-buffered
stderr, unbuffered with PYTHONUNBUFFERED, newlines untranslated), and its end is an interpreter's
end: threads still running are waited for and `atexit` functions run before it exits.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path

ADDRESS_VARIABLE = "MCP_TEST_FORK_SERVER"
COLD_VARIABLE = "MCP_TEST_COLD"
# Only servers that never look at their own process (pid, parent, process group) start warm.
WARM_MODULES = (
    "tests.mcp_servers.trust",
    "tests.mcp_servers.asks",
    "tests.mcp_servers.testkit",
    "tests.mcp_servers.loop",
    # nerve's own servers, through stand-ins that run their `main` (`servers/` cannot know of tests).
    "tests.mcp_servers.env_query",
    "tests.mcp_servers.geo_simulator",
    # `python -m bot` for the tests of what the command line says and does (`tests/warm_nerve`).
    "tests.warm_nerve",
)
_STDIO = (0, 1, 2)
_PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_ANCESTORS_LOOKED_AT = 4


# --- the started process ---------------------------------------------------------------------------


def hand_over_if_warm() -> None:
    """Called while `python -m tests.mcp_servers.<name>` imports its package: when a fork server is
    running and the module is one it has warm, the server runs there and this process only stands in
    for it until it ends (this never returns then)."""
    if sys.argv[:1] != ["-m"] or len(sys.orig_argv) < 3:
        return
    try:
        module = sys.orig_argv[sys.orig_argv.index("-m") + 1]
    except (ValueError, IndexError):
        return
    # A test about the server's own process (is it gone after a cancel?) starts it the usual way.
    if module not in WARM_MODULES or os.environ.get(COLD_VARIABLE):
        return
    address = _fork_server_address()
    if address is None:
        return
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(address)
    except OSError:
        return  # the run that started it has ended: start the usual way
    arguments = sys.orig_argv[sys.orig_argv.index("-m") + 2 :]
    # A signal this process was started with ignored (`nohup`, a parent's SIG_IGN) is the server's.
    ignored = [number for number in _PASSED_ON if signal.getsignal(number) == signal.SIG_IGN]
    request = {
        "module": module,
        "argv": [module, *arguments],
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "ignored": ignored,
    }
    socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], list(_STDIO))
    _stand_in(connection, ignored)


def _fork_server_address() -> str | None:
    pid = os.getppid()
    for _ in range(_ANCESTORS_LOOKED_AT):
        if pid <= 1:
            return None
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return None
        prefix = ADDRESS_VARIABLE.encode() + b"="
        for entry in environ:
            if entry.startswith(prefix):
                return entry[len(prefix) :].decode()
        pid = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:"))
    return None


def _stand_in(connection: socket.socket, ignored: list[int]) -> None:
    """Pass signals on to the server (those it does not ignore), then end as it ended."""
    reader = connection.makefile("r")
    child = int(reader.readline())
    for number in _PASSED_ON:
        if number not in ignored:
            signal.signal(number, lambda received, _frame: _signal(child, received))
    # The server holds the pipes now: the host sees them close when the server ends, not later.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in _STDIO:
        os.dup2(null, fd)
    line = reader.readline()
    status = int(line) if line else -signal.SIGKILL
    if status < 0:
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    os._exit(status)


def _signal(child: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(child, number)


# --- the fork server -------------------------------------------------------------------------------


def serve(address: str) -> None:
    """Accept hand-overs on `address` until stdin closes (the test run ended)."""
    for module in WARM_MODULES:
        for name in (module, *getattr(importlib.import_module(module), "PRELOAD", ())):
            importlib.import_module(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(sys.stdin, selectors.EVENT_READ, "stop")
    children: dict[int, tuple[socket.socket, int]] = {}  # pidfd → (connection, pid)
    print("ready", flush=True)
    while True:
        for key, _ in selector.select():
            if key.data == "stop":
                for _connection, pid in children.values():
                    _kill(pid)
                return
            if key.data == "accept":
                started = _start(listener, children)
                if started is not None:
                    pidfd, connection = started
                    selector.register(pidfd, selectors.EVENT_READ, ("ended", pidfd))
                    selector.register(connection, selectors.EVENT_READ, ("stand-in gone", pidfd))
                continue
            what, pidfd = key.data
            if pidfd not in children:
                continue  # its server ended and its stand-in left in the same round
            connection, pid = children.pop(pidfd)
            selector.unregister(pidfd)
            selector.unregister(connection)
            if what == "stand-in gone":
                _kill(pid)
            _, status = os.waitpid(pid, 0)
            with contextlib.suppress(OSError):
                connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            connection.close()
            os.close(pidfd)


def _start(
    listener: socket.socket, children: dict[int, tuple[socket.socket, int]]
) -> tuple[int, socket.socket] | None:
    connection, _ = listener.accept()
    message, fds, _, _ = socket.recv_fds(connection, 1 << 20, len(_STDIO))
    if len(fds) != len(_STDIO):
        connection.close()
        return None
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        _run_child(request, fds, listener, connection, children)
    for fd in fds:
        os.close(fd)
    connection.sendall(f"{pid}\n".encode())
    pidfd = os.pidfd_open(pid)
    children[pidfd] = (connection, pid)
    return pidfd, connection


def _run_child(
    request: dict[str, object],
    fds: list[int],
    listener: socket.socket,
    connection: socket.socket,
    children: dict[int, tuple[socket.socket, int]],
) -> None:
    code, by_signal = 0, 0
    try:
        listener.close()
        connection.close()
        for other, _ in children.values():
            other.close()
        for pidfd in children:
            os.close(pidfd)
        for fd, target in zip(fds, _STDIO, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(dict(request["env"]))  # type: ignore[call-overload]
        # The server's own stdio from here on, made as the interpreter makes it at start-up.
        unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdin = sys.__stdin__ = _std_stream(0, sys.__stdin__, unbuffered)
        sys.stdout = sys.__stdout__ = _std_stream(1, sys.__stdout__, unbuffered)
        sys.stderr = sys.__stderr__ = _std_stream(2, sys.__stderr__, unbuffered)
        for number in request.get("ignored", ()):  # type: ignore[attr-defined]
            signal.signal(number, signal.SIG_IGN)
        sys.argv = list(request["argv"])  # type: ignore[call-overload]
        sys.modules.pop(str(request["module"]), None)  # it runs anew as `__main__`, as it would cold
        runpy.run_module(str(request["module"]), run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except KeyboardInterrupt:
        traceback.print_exc()
        by_signal = signal.SIGINT  # as the interpreter ends on an uncaught Ctrl-C
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        _end(code, by_signal)


def _std_stream(fd: int, started: object, unbuffered: bool) -> io.TextIOWrapper:
    """Stream `fd` as the interpreter makes its standard streams (with the encoding and errors of the
    fork server's own, which had the same locale)."""
    reading = fd == 0
    raw = io.FileIO(fd, "rb" if reading else "wb", closefd=False)
    buffer: io.RawIOBase | io.BufferedIOBase
    if reading:
        buffer = io.BufferedReader(raw)
    elif unbuffered:
        buffer = raw
    else:
        buffer = io.BufferedWriter(raw)
    return io.TextIOWrapper(
        buffer,  # type: ignore[arg-type]
        encoding=getattr(started, "encoding", None) or "utf-8",
        errors=getattr(started, "errors", None) or ("backslashreplace" if fd == 2 else "strict"),
        newline="\n",
        line_buffering=not unbuffered and (fd == 2 or raw.isatty()),
        write_through=unbuffered,
    )


def _exit_code(code: object) -> int:
    """The exit status of `SystemExit(code)`, as the interpreter gives it (a message is printed)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _end(code: int, by_signal: int) -> None:
    """End as the interpreter ends: wait for threads still running, run the `atexit` functions, flush
    the standard streams; then exit with `code`, or by the signal `by_signal` when there is one."""
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    if by_signal:
        signal.signal(by_signal, signal.SIG_DFL)
        os.kill(os.getpid(), by_signal)
    os._exit(code)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
