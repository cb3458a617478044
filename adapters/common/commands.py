"""The commands people type to nerve, once for every surface: each maps this table to its syntax
and keeps its own handlers, so a command shows the same everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Surface = Literal["slack", "discord", "terminal"]
SLACK: Surface = "slack"
DISCORD: Surface = "discord"
TERMINAL: Surface = "terminal"
EVERYWHERE: tuple[Surface, ...] = (SLACK, DISCORD, TERMINAL)


@dataclass(frozen=True, slots=True)
class Option:
    """What a command takes: `name` and `about` as Discord shows them, `written` for the text surfaces."""

    name: str
    about: str
    optional: bool = False
    written: str = ""

    def shown(self) -> str:
        """How Slack's and the terminal's help write it: `NAME`, or `[NAME]` when it may be left out."""
        word = self.written or self.name.upper()
        return f"[{word}]" if self.optional else word


@dataclass(frozen=True, slots=True)
class Command:
    """One row: a command, its summary, the surfaces that offer it (`on`) and what it takes. A
    name has a row per way the surfaces take it, so each surface finds at most one row per name."""

    name: str
    summary: str
    on: tuple[Surface, ...]
    options: tuple[Option, ...] = ()
    aliases: tuple[str, ...] = ()

    def written(self) -> str:
        """The name and what it takes, as the text surfaces write them: `prompt NAME [arg=value …]`."""
        return " ".join([self.name, *(option.shown() for option in self.options)])


# What Discord shows under an option's name; declared apart where a row would not fit on a line.
SERVER = Option("server", "The service to sign in to", written="NAME")
PROMPT_ARGUMENTS = 'Its arguments: topic=weather tone="very dry"; a value alone fills the first'
REVOKE = "PLACE SERVER/TOOL, as the list shows it, to ask for approval there again"
MEMORY = "what I remember about you and this place: forget one or all, or use one of yours anywhere"
MEMORY_WRITTEN = "forget ID|all · anywhere ID on|off"
FORGET_ME = "delete everything stored about you (asked first)"
EXPORT = "everything stored about you, as one JSON file"
SCHEDULES = "the prompts you asked me to run later, with their next and last runs; change one"

COMMANDS: tuple[Command, ...] = (
    Command(
        "ask",
        "ask a question; in a channel I answer there and open a thread for follow-ups",
        (DISCORD,),
        (
            Option("question", "What you want to know"),
            Option("file", "A file to ask about: an image, a text file or a PDF", optional=True),
        ),
    ),
    Command(
        "show",
        "show tool result N of the last answer in full (all of them without N)",
        (TERMINAL,),
        (Option("n", "Which tool result", optional=True, written="N"),),
    ),
    Command(
        "attach",
        "attach a file to your next question; alone, list what is attached; clear, forget them",
        (TERMINAL,),
        (Option("path", "The file", optional=True, written="PATH|clear"),),
    ),
    Command("tools", "the tools I can use here", EVERYWHERE),
    Command("prompts", "the prompts you can start here, with their arguments", (SLACK,)),
    Command(
        "prompt",
        "start a prompt one of my tool servers offers; I answer it as I answer a question",
        (SLACK, DISCORD),
        (
            Option("name", "The prompt to start"),
            Option("arguments", PROMPT_ARGUMENTS, optional=True, written="arg=value …"),
        ),
    ),
    Command(
        "prompt",
        "list the prompts the servers offer; /prompt NAME [arg=value ...] starts one",
        (TERMINAL,),
        (Option("name", "The prompt to start", optional=True, written="NAME [arg=value ...]"),),
    ),
    Command(
        "approvals",
        "admins: list what is always allowed where, or revoke one",
        (SLACK, DISCORD),
        (Option("revoke", REVOKE, optional=True, written="revoke PLACE SERVER TOOL"),),
    ),
    Command("connections", "the services you connected with your own account", EVERYWHERE),
    Command("connect", "connect a service with your own account", EVERYWHERE, (SERVER,)),
    Command("disconnect", "stop using your account with a service", (SLACK, TERMINAL), (SERVER,)),
    Command(
        "memory",
        MEMORY,
        (SLACK, TERMINAL),
        (Option("what", "What to do with a memory", optional=True, written=MEMORY_WRITTEN),),
    ),
    Command("memory", MEMORY, (DISCORD,)),
    Command("forget", FORGET_ME + "; in a DM with me", (SLACK,), (Option("me", "You", written="me"),)),
    Command("forget-me", FORGET_ME, (DISCORD, TERMINAL)),
    Command("export", EXPORT + "; in a DM with me", (SLACK,)),
    Command("export", EXPORT, (DISCORD,)),
    Command(
        "export",
        EXPORT + ", into FILE (nerve-export.json without it)",
        (TERMINAL,),
        (Option("file", "Where to write it", optional=True, written="FILE"),),
    ),
    Command(
        "schedules",
        SCHEDULES,
        (SLACK, TERMINAL),
        (Option("change", "cancel, pause or resume one", optional=True, written="cancel|pause|resume ID"),),
    ),
    Command(
        "schedules",
        SCHEDULES,
        (DISCORD,),
        (
            Option("action", "Cancel, pause or resume one (name it in schedule)", optional=True),
            Option("schedule", "The schedule's id, as the list shows it", optional=True),
        ),
    ),
    Command("usage", "how much of the model you used today and this month, and your limits", EVERYWHERE),
    Command(
        "timezone",
        "the time zone your schedules are read and shown in; set it, or reset it to the default",
        (SLACK, DISCORD, TERMINAL),
        (Option("zone", "An IANA zone such as Europe/Paris, or reset", optional=True, written="ZONE|reset"),),
    ),
    Command("reset", "in a DM: start a new conversation", (SLACK,)),
    Command("reset", "start a new conversation in this thread or DM", (DISCORD,)),
    Command("reset", "start a new conversation in this thread", (TERMINAL,)),
    Command("help", "how to use nerve", EVERYWHERE),
    Command("quit", "leave (Ctrl-D or Ctrl-C at the prompt work too)", (TERMINAL,), aliases=("exit",)),
)


def offered_on(surface: Surface) -> tuple[Command, ...]:
    """The commands `surface` offers, in the table's order (the order its help lists them in)."""
    return tuple(command for command in COMMANDS if surface in command.on)


def command_on(surface: Surface, word: str) -> Command | None:
    """The command `word` names on `surface`, by its name or an alias; None for any other word."""
    return next((c for c in offered_on(surface) if word == c.name or word in c.aliases), None)
