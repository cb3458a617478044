"""What `nerve` accepts: the parser of its commands, their options and help texts.

Apart from the command line's wiring (`adapters.cli`) so that each reads on its own: what a person
may type, and what runs for it. It imports only what parsing needs (Settings' platforms, the place
and person values), as `nerve --help` must start in a fraction of a second.
"""

from __future__ import annotations

import argparse
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from adapters.settings import Settings
from adapters.terminal.safe import printable
from bot.policy.scopes import Place
from bot.types import Person

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
