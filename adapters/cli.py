"""`nerve …` command line: load Settings once, build the parts, run one front end. Wiring only.

What it accepts (the commands, their options, their help) is parsed by `adapters.cli_args`; here is
what runs for each, with the start-up's net for errors, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from adapters.cli_args import parse_args
from adapters.settings import Settings, bad_setting
from adapters.terminal.safe import printable
from bot.errors import NerveError

if TYPE_CHECKING:  # each command imports what it runs: `nerve --help` must not load the agent or MCP
    from bot.runtime import Runtime

# What a command runs once Settings are loaded; its result is the exit code.
Job = Callable[[Settings], Coroutine[Any, Any, int]]


def _with_runtime(front_end: Callable[[Runtime], Awaitable[int | None]]) -> Job:
    """The job of a front end that runs on the runtime; one that returns nothing exits 0."""
    from bot.runtime import open_runtime

    async def job(settings: Settings) -> int:
        async with open_runtime(settings) as runtime:
            return await front_end(runtime) or 0

    return job


def _job(
    args: argparse.Namespace, settings: Settings, chat_notices: Callable[[], str | None], stop: asyncio.Event
) -> Job:
    """What the command runs; `stop` is set on SIGTERM for the front ends that wind down gracefully."""
    # Adapters are imported here, not at the top: `nerve chat` should not load Slack or Discord code.
    command = args.command
    if command == "chat":
        from adapters.ops_http import chat_ops
        from adapters.terminal.chat import TerminalChat
        from adapters.terminal.runtime import terminal_runtime

        async def chat(settings: Settings) -> int:
            # A sign-in's browser comes back to a loopback port. /healthz, /readyz and /metrics only
            # when NERVE_HTTP_PORT is set (adapters.ops_http says why).
            async with (
                terminal_runtime(settings, servers_in_background=True) as (runtime, sign_in),
                chat_ops(runtime.agent, runtime.settings),
            ):
                await TerminalChat(runtime, args.thread, notices=chat_notices, sign_in=sign_in).run()
            return 0

        return chat
    if command == "connections":
        from adapters.terminal.sign_in import print_connections

        return print_connections
    if command in ("ask", "threads", "history", "delete"):
        from adapters import conversations_cli as conversations

        if command == "ask":
            return conversations.ask_job(
                args.text, args.thread, as_json=args.json, approve_all=args.yes, files=args.file
            )
        if command == "threads":
            return conversations.threads_job(archived=args.all, as_json=args.json)
        if command == "delete":
            return conversations.delete_job(args.thread, args.id, yes=args.yes)
        return conversations.history_job(args.thread, args.id, archived=args.archived, as_json=args.json)
    if command == "memory":
        from adapters import memory_cli

        if args.memory_command == "forget":
            return memory_cli.forget_job(args.memory_id)
        return memory_cli.list_job(args.user, args.place, as_json=args.json)
    if command == "schedules":
        from adapters import schedules_cli

        if args.schedules_command is not None:
            return schedules_cli.change_job(args.schedules_command, args.schedule_id)
        return schedules_cli.list_job(args.user, as_json=args.json)
    if command == "usage":
        from adapters import usage_cli

        return usage_cli.usage_job(args.by, args.since, as_json=args.json)
    if command in ("forget", "export"):
        from adapters import person_data_cli as rights

        if command == "forget":
            return rights.forget_job(args.user, yes=args.yes)
        return rights.export_job(args.user, args.output)
    if command == "tools":
        from adapters.terminal.views import print_tools

        async def tools(runtime: Runtime) -> int:
            return print_tools(runtime, as_json=args.json, place=args.place)

        return _with_runtime(tools)
    if command == "approvals":
        from adapters.terminal.views import print_approvals, revoke_approval
        from bot.runtime import open_store

        async def approvals(settings: Settings) -> int:
            async with open_store(settings) as store:
                if args.approvals_command == "revoke":
                    return await revoke_approval(store, args.place, args.server, args.tool)
                return await print_approvals(store)

        return approvals
    if command == "connect":
        from adapters.connect_cli import connect

        return lambda settings: connect(settings, args.server)
    if command == "slack":
        from adapters.slack.serve import check_settings, run_slack

        check_settings(settings)
        return _with_runtime(lambda runtime: run_slack(runtime.agent, settings, stop=stop))
    if command == "worker":
        from adapters.slack.worker import check_settings as check_worker_settings
        from adapters.slack.worker import run_worker

        check_worker_settings(settings)
        return _with_runtime(lambda runtime: run_worker(runtime.agent, settings, stop=stop))
    from adapters.discord.app import check_settings as check_discord_settings
    from adapters.discord.app import run_discord

    check_discord_settings(settings)
    return _with_runtime(lambda runtime: run_discord(runtime.agent, settings, stop=stop))


E = TypeVar("E", bound=BaseException)


def _behind(exc: BaseException, kind: type[E]) -> E | None:
    """The exception of `kind` that is `exc` or that a task group wrapped in it."""
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop(0)
        if isinstance(current, kind):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
    return None


def _configure_logging(args: argparse.Namespace, settings: Settings) -> Callable[[], str | None]:
    """Logs to stderr, or to the chat's log file unless -v; returns the chat's notice about the log."""
    from adapters.log_format import install, log_to_file, log_to_stderr, settings_secrets
    from bot.observe import tracing

    in_file = args.command == "chat" and not args.verbose
    chat_log = log_to_file(settings.nerve_log_level, settings.nerve_log_file) if in_file else None
    if chat_log is None:
        log_to_stderr(settings.nerve_log_level)
    install(settings.nerve_log_format, settings_secrets(settings))
    tracing.start(settings.otel_exporter_otlp_endpoint)
    return chat_log.notice if chat_log is not None else lambda: None


# Seconds past NERVE_SHUTDOWN_GRACE a front end may take to close what it opened (cut-off turns
# saying so, the MCP servers' processes) before it is cancelled outright.
CLOSE_ALLOWANCE = 10.0


async def until_terminated(work: Coroutine[Any, Any, int], stop: asyncio.Event, grace: float) -> int:
    """Run a long-lived front end until it ends or SIGTERM arrives (then exit 0, a stop asked for).
    SIGTERM sets `stop`, giving running turns `grace` seconds; whatever still runs CLOSE_ALLOWANCE
    seconds later (or at a second SIGTERM) is cancelled, and every `async with` closes what it opened."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    terminated = False
    log = logging.getLogger(__name__)

    def terminate() -> None:
        nonlocal terminated
        if terminated:
            log.warning("nerve: stopping now (SIGTERM)")
            task.cancel()
        else:
            log.warning("nerve: stopping (SIGTERM): no new turns; running ones get up to %g s", grace)
            stop.set()
            loop.call_later(grace + CLOSE_ALLOWANCE, task.cancel)
        terminated = True

    try:
        loop.add_signal_handler(signal.SIGTERM, terminate)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here (not the main thread)
        return await task
    try:
        return await task
    except asyncio.CancelledError:
        if terminated:
            return 0
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        if terminated:
            # The process ends without a garbage collection over its 100,000-odd objects (most of a
            # second on a busy machine, which the grace would have to cover); reference counting
            # still frees them.
            gc.freeze()


# The commands that start the MCP servers: their processes start before the command loads the rest.
STARTS_SERVERS = frozenset({"chat", "ask", "tools", "slack", "discord", "worker"})


# The long-running services, which check their settings before anything starts.
SERVICES = frozenset({"slack", "discord", "worker"})


async def _run(args: argparse.Namespace, settings: Settings, notices: Callable[[], str | None]) -> int:
    """The command, with the stdio servers starting while it loads its libraries (`bot.mcp.early_start`);
    a service checks its settings first, so a refused start launches no server."""
    stop = asyncio.Event()
    if args.command in SERVICES:
        job = _job(args, settings, notices, stop)
        async with _servers_starting(args.command, settings):
            return await until_terminated(job(settings), stop, settings.nerve_shutdown_grace)
    async with _servers_starting(args.command, settings):
        return await _job(args, settings, notices, stop)(settings)


@contextlib.asynccontextmanager
async def _servers_starting(command: str, settings: Settings) -> AsyncIterator[None]:
    if command not in STARTS_SERVERS:
        yield
        return
    from bot.mcp.early_start import started_early
    from bot.mcp.servers_file import read_mcp_config

    try:
        servers = read_mcp_config(settings.nerve_mcp_config, platforms=settings.platforms).servers
    except (NerveError, OSError):
        servers = {}  # the runtime reports a file it cannot read, in its own words
    async with started_early(servers):
        yield


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "secret-key":
        from bot.mcp.auth.vault import new_secret_key

        print(new_secret_key())
        return 0
    if args.command == "doctor":
        # Before Settings: a bad setting is one of the things it reports, not a reason to stop.
        from adapters.doctor.run import run_doctor

        try:
            return run_doctor(as_json_output=args.json, verbose=args.verbose)
        except KeyboardInterrupt:
            return 130
    try:
        settings = Settings()
    except ValidationError as exc:
        sys.stderr.write(f"nerve: {printable(bad_setting(exc))}\n")
        return 2
    try:
        notices = _configure_logging(args, settings)
        return asyncio.run(_run(args, settings, notices))
    except KeyboardInterrupt:
        return _interrupted(args.command)
    except Exception as exc:
        # The one net for start-up: a typed error is a sentence for the user, never a traceback.
        from adapters.terminal.keyboard import Interrupted

        if _behind(exc, Interrupted) is not None:
            return _interrupted(args.command)
        error = _behind(exc, NerveError)  # the error nerve raised on purpose
        if error is None:
            raise
        sys.stderr.write(f"nerve: {printable(error.message)}\n")
        return 2


def _interrupted(command: str) -> int:
    """Ctrl-C is how people leave the chat (the prompt handles it; this covers start-up and
    shutdown); for every other command it is an interruption."""
    if command == "chat":
        return 0
    if command == "ask":
        # The answer may have stopped mid-line: end it, and say it was cut short on purpose.
        with contextlib.suppress(OSError):  # stdout may be a pipe already closed
            sys.stdout.flush()
        sys.stderr.write("\nnerve: cancelled\n")
    return 130
