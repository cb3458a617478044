"""`nerve …` command line: load Settings once, build the parts, run one front end. Wiring only."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from adapters.settings import Settings, bad_setting
from adapters.terminal.safe import printable
from bot.errors import NerveError
from bot.policy.scopes import Place
from bot.types import Person

if TYPE_CHECKING:  # each command imports what it runs: `nerve --help` must not load the agent or MCP
    from bot.runtime import Runtime

# What a command runs once Settings are loaded; its result is the exit code.
Job = Callable[[Settings], Coroutine[Any, Any, int]]
VERBOSE_HELP = "log to stderr instead of NERVE_LOG_FILE (the chat's log file)"
YES_HELP = (
    "approve every tool call of this one question that needs approval; without it, such calls are "
    "asked about on a terminal and denied otherwise"
)
FILE_HELP = "a file to ask about (text, CSV, JSON, a PDF, an image); repeat it for several"
PLACE_HELP = (
    "only the tools the servers file's policy offers in this place: the platform, then any of "
    "dm, CHANNEL_ID (or channel:ID), guild:ID (Discord), user:ID, joined by ':' in any order; "
    "e.g. slack:C123, slack:dm, slack:C123:user:U1, discord:guild:G1:C5, terminal"
)
MEMORY_HELP = "list what people asked nerve to remember, newest first; forget one"
MEMORY_DESCRIPTION = (
    "List the memories people saved (the remember tool), newest first: every one, or a person's "
    "(--user), or a place's (--place), or with both the person's and the place's. It reads the store "
    "only: no model, no servers."
)
MEMORY_USER_HELP = (
    "a person's memories, by the id nerve keeps them under: slack:TEAM:USER, discord:USER, terminal:NAME:NAME"
)
MEMORY_PLACE_HELP = (
    "a place's memories, written as for nerve tools --place: a channel's (slack:C123), a Discord "
    "server's (discord:guild:G1)"
)

USER_HELP = (
    "the person, by id: slack:WORKSPACE_ID:USER_ID, discord:USER_ID (Discord's user ids are global),"
    " terminal:LOGIN:LOGIN"
)

USAGE_HELP = (
    "show who used how many model tokens (and money, with prices set), by person, place, model or day"
)
USAGE_DESCRIPTION = (
    "Sum the usage of every model request since a day (the start of this month by default, in"
    " NERVE_BUDGET_TIMEZONE), grouped by person, place, model or day; ~ marks estimated figures. It"
    " reads the store only: no model, no servers."
)

SCHEDULES_HELP = "list the prompts people asked nerve to run later; cancel, pause or resume one"
SCHEDULES_DESCRIPTION = (
    "List the schedules still in effect (active or paused), oldest first: every one, or a person's"
    " (--user), each with its place, next run in its time zone, and last run with its outcome. It"
    " reads the store only: no model, no servers; a running nerve sees a change within seconds."
)
SCHEDULE_ACTIONS = {
    "cancel": "stop one schedule for good, whoever's it is",
    "pause": "let one schedule's runs pass until it is resumed",
    "resume": "run a paused schedule again from now on",
}

WORKER_HELP = "run only the job worker: answer the Slack turns and scheduled runs queued on PostgreSQL"
WORKER_DESCRIPTION = (
    "Run only the job worker, with no front end: it answers the Slack turns that `nerve slack` "
    "processes on the same NERVE_DATABASE_URL queued, and runs Slack's due schedule slots, which "
    "it looks for too (each runs once, whichever process looks or runs it), posting the answers "
    "with SLACK_BOT_TOKEN, "
    "for deployments that want more workers than receivers. Slack never delivers to it. Discord "
    "turns are jobs too, on a queue of their own that the `nerve discord` processes on the same "
    "database share (any of them answers, whichever shard received it); a worker takes none of "
    "them. /healthz, /readyz and /metrics answer on NERVE_HTTP_PORT; SIGTERM lets the "
    "running jobs finish within NERVE_SHUTDOWN_GRACE and puts the rest back for another process."
)


def _place(text: str) -> Place:
    """`--place` as a Place; a mistake is a usage error that says what to write."""
    try:
        return Place.parse(text, Settings.platforms)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(printable(str(exc))) from None


def _person(text: str) -> Person:
    """`--user` as a Person; a mistake is a usage error that says what to write."""
    try:
        return Person.named(text, Settings.platforms)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(printable(str(exc))) from None


def _version() -> str:
    try:
        return version("nerve")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nerve", description="A chat bot whose hands are MCP servers.")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    parser.add_argument("--version", action="version", version=f"nerve {_version()}")
    commands = parser.add_subparsers(dest="command")
    chat = commands.add_parser("chat", help="chat in the terminal (the default)")
    chat.add_argument("--thread", default="default", help="conversation to continue (default: default)")
    # SUPPRESS: `nerve -v chat` and `nerve chat -v` both work; the subcommand must not reset the flag.
    chat.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    ask = commands.add_parser("ask", help="ask one question and exit")
    ask.add_argument("text", help="the question; - reads it from stdin")
    ask.add_argument("--thread", help="conversation to continue (default: a new one, named on stderr)")
    ask.add_argument("--json", action="store_true", help="print the answer and tool calls as JSON")
    ask.add_argument("-y", "--yes", action="store_true", help=YES_HELP)
    ask.add_argument("--file", action="append", default=[], metavar="PATH", help=FILE_HELP)
    tools = commands.add_parser("tools", help="list the tools the model is offered")
    tools.add_argument("--json", action="store_true", help="in the OpenAI tools format")
    tools.add_argument("--place", type=_place, metavar="PLACE", help=PLACE_HELP)
    threads = commands.add_parser("threads", help="list your terminal conversations, last active first")
    threads.add_argument("--all", action="store_true", help="also those archived by /reset")
    threads.add_argument("--json", action="store_true", help="as a JSON list")
    history = commands.add_parser("history", help="print a stored conversation, with times")
    history.add_argument("--thread", default="default", help="conversation to print (default: default)")
    history.add_argument("--id", type=int, help="print this conversation (an id from nerve threads --all)")
    history.add_argument("--archived", action="store_true", help="also those /reset archived, oldest first")
    history.add_argument("--json", action="store_true", help="messages with their times, as JSON")
    delete = commands.add_parser("delete", help="delete a conversation and everything holding its text")
    which = delete.add_mutually_exclusive_group(required=True)
    which.add_argument("--thread", help="every conversation of this thread, current and archived")
    which.add_argument("--id", type=int, help="one conversation (an id from nerve threads --all)")
    delete.add_argument("-y", "--yes", action="store_true", help="do not ask (needed off a terminal)")
    forget_person = commands.add_parser("forget", help="delete everything stored about one person")
    forget_person.add_argument("--user", required=True, type=_person, metavar="ID", help=USER_HELP)
    forget_person.add_argument("-y", "--yes", action="store_true", help="do not ask (needed off a terminal)")
    export_person = commands.add_parser("export", help="everything stored about one person, as JSON")
    export_person.add_argument("--user", required=True, type=_person, metavar="ID", help=USER_HELP)
    export_person.add_argument("--output", type=Path, metavar="FILE", help="write it there, not to stdout")
    approvals = commands.add_parser("approvals", help='list remembered approvals ("always allow here")')
    revoke = approvals.add_subparsers(dest="approvals_command").add_parser(
        "revoke", help="forget one remembered approval: that tool asks again there"
    )
    revoke.add_argument("place", help="as listed, e.g. slack:C123, discord:42, terminal")
    revoke.add_argument("server", help="the server's name in the servers file")
    revoke.add_argument("tool", help="the tool's name on its server")
    memory = commands.add_parser("memory", help=MEMORY_HELP, description=MEMORY_DESCRIPTION)
    memory.add_argument("--user", metavar="ID", help=MEMORY_USER_HELP)
    memory.add_argument("--place", type=_place, metavar="PLACE", help=MEMORY_PLACE_HELP)
    memory.add_argument("--json", action="store_true", help="as one JSON document")
    forget = memory.add_subparsers(dest="memory_command").add_parser(
        "forget", help="delete one memory, whoever's it is"
    )
    forget.add_argument("memory_id", metavar="ID", help="as listed by nerve memory, e.g. m3f9a2c1")
    schedules = commands.add_parser("schedules", help=SCHEDULES_HELP, description=SCHEDULES_DESCRIPTION)
    schedules.add_argument("--user", type=_person, metavar="ID", help="only this person's; " + USER_HELP)
    schedules.add_argument("--json", action="store_true", help="as one JSON document")
    change = schedules.add_subparsers(dest="schedules_command")
    for action, about in SCHEDULE_ACTIONS.items():
        changed = change.add_parser(action, help=about)
        changed.add_argument("schedule_id", metavar="ID", help="as listed by nerve schedules, e.g. s3f9a2c1")
    usage = commands.add_parser("usage", help=USAGE_HELP, description=USAGE_DESCRIPTION)
    usage.add_argument("--by", choices=("person", "place", "model", "day"), default="person", help="group by")
    usage.add_argument("--since", metavar="DATE", help="from this day on (YYYY-MM-DD); this month by default")
    usage.add_argument("--json", action="store_true", help="as one JSON document")
    doctor = commands.add_parser("doctor", help="check this deployment and say what to fix")
    doctor.add_argument("--json", action="store_true", help="one JSON object per check, as a list")
    doctor_log = "also show the log on stderr (a failing server's own output, for one)"
    doctor.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=doctor_log)
    connect = commands.add_parser("connect", help="sign in to a server that needs OAuth, in the browser")
    connect.add_argument("server", help="the server's name in the servers file")
    commands.add_parser("connections", help="list the servers you connected with your own account")
    commands.add_parser("secret-key", help="print a new NERVE_SECRET_KEY (it encrypts stored sign-ins)")
    commands.add_parser("slack", help="run on Slack")
    commands.add_parser("discord", help="run on Discord")
    commands.add_parser("worker", help=WORKER_HELP, description=WORKER_DESCRIPTION)
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The arguments; with no command, those of `chat` (the default) with its own defaults."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args([*argv, "chat"])
    return args


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
