"""A server's question in the terminal: a form asked field by field, or a link to open yourself.

A tool that needs input waits inside its call, so each question is asked while the turn runs, one at
a time, with the live view paused so nothing draws over the prompts. Ctrl-C or end of input answers
"cancel"; a link is never opened for the person."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console

from adapters.common import cards
from adapters.resources import link_host
from adapters.terminal.keyboard import ReadLine
from adapters.terminal.safe import printable, say, shown
from bot.errors import AskError
from bot.types import (
    REQUIRED,
    Answer,
    Answered,
    Cancel,
    ConversationKey,
    Decline,
    FieldError,
    FieldValue,
    Form,
    FormField,
    InputAction,
    InputRequest,
    LinkOpened,
    Progress,
    Submit,
    TurnEvent,
    describe_field,
    parse_field,
)

# Enter sends: the person has just filled the form in, so sending is what they came to do;
# sending nothing (n) or declining (d) is typed on purpose.
SEND = "Send? [Y/n/d=decline] "
HOW_TO_SEND = "Press Enter or y to send it, n to send nothing, d to decline."
OPEN = "Open it yourself, then press Enter when done, or type d to decline: "
HOW_TO_OPEN = "Press Enter once you are done there, or type d to decline."
DECLINES: dict[str, InputAction] = {"d": "decline", "decline": "decline"}
SENDS: dict[str, InputAction] = {"y": "accept", "yes": "accept", "": "accept", "n": "cancel", "no": "cancel"}
SENDS |= DECLINES
OPENS: dict[str, InputAction] = {"": "accept", "done": "accept", "y": "accept", "yes": "accept", **DECLINES}
DONE = {"accept": "Sent.", "decline": "Declined.", "cancel": "Cancelled: nothing was sent."}
# What a person's choice tells the server, as an answer to the ask.
ANSWERS: dict[InputAction, Answer] = {"accept": LinkOpened(), "decline": Decline(), "cancel": Cancel()}

if TYPE_CHECKING:  # the façade loads the MCP client: `nerve history` and the like need none
    from bot.agent import Agent


@dataclass(frozen=True, slots=True, kw_only=True)
class Parked:
    """A parked turn's questions, asked here; `resume`: the turn an answer here let go on, if any."""

    key: ConversationKey
    tools: tuple[str, ...]
    resume: str | None


class _Stop(Exception):
    """The person pressed Ctrl-C or ended the input: the question is dismissed."""


@dataclass(eq=False)
class FillIn:
    """The questions servers ask during one piece of a turn; `async with`, then `watching(sink)`.
    Without `read` (a script) each is declined at once: a script never waits for a person."""

    agent: Agent
    user: str
    read: ReadLine | None
    console: Console
    pause: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext

    def __post_init__(self) -> None:
        self._one_at_a_time = asyncio.Lock()
        # Each question being asked, by request id.
        self._asking: dict[str, asyncio.Task[None]] = {}
        # Requests that ended without this terminal's answer (expired, the call stopped): status.
        self._ended: dict[str, str] = {}
        # Questions shown since the last `settle` (not those nerve refused to show), and the parked
        # turn an answer here let go on.
        self._seen: dict[str, InputRequest] = {}
        self._resume: str | None = None
        # The question on screen, and whether it is waiting for the person to type.
        self._current: str | None = None
        self._at_prompt = False

    async def __aenter__(self) -> FillIn:
        return self

    async def __aexit__(self, *exc: object) -> None:
        tasks = list(self._asking.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def parked(self) -> bool:
        """A question shown is still open: live ones end before their call, so only a parked turn does."""
        return any(request_id not in self._ended for request_id in self._seen)

    async def settle(self) -> Parked | None:
        """After a piece of a turn returned: wait for the questions it left open (None: it did not park)."""

        left_open = [request for request_id, request in self._seen.items() if request_id not in self._ended]
        for request_id, task in list(self._asking.items()):
            if request_id in self._ended and (request_id != self._current or self._at_prompt):
                task.cancel()
        if self._asking:
            await asyncio.wait(list(self._asking.values()))
        resume, self._resume = self._resume, None
        self._seen.clear()
        if not left_open:
            return None
        tools = tuple(dict.fromkeys(tool for request in left_open for tool in request.tools))
        return Parked(key=left_open[0].key, tools=tools, resume=resume)

    def watching(self, sink: Progress) -> Progress:
        """`sink`, with this person's questions taken out and asked."""

        async def progress(event: TurnEvent) -> None:
            if event.kind == "ask" and event.ask is not None and event.ask.input is not None:
                request = event.ask.input
                if request.user_id == self.user:
                    if request.refused is None:
                        self._seen[request.request_id] = request
                    task = asyncio.create_task(self._ask(request), name="nerve-fill-in")
                    self._asking[request.request_id] = task
                    task.add_done_callback(lambda _: self._asking.pop(request.request_id, None))
            elif event.kind == "ask_done" and event.ask is not None and event.ask.input is not None:
                # How a question ended, for one not asked yet when it did.
                self._ended[event.ask.id] = event.message
            else:
                await sink(event)

        return progress

    async def _ask(self, request: InputRequest) -> None:
        who = shown(request.server)
        async with self._one_at_a_time:
            if request.request_id in self._ended:
                ended = shown(cards.ended_words(request, self._ended[request.request_id]))
                self.console.print(f"[dim]The question from {who} ended before you got to it: {ended}[/dim]")
                return
            self._current = request.request_id
            with self.pause():
                try:
                    await self._show(request)
                except asyncio.CancelledError:
                    self.console.print(f"[yellow]The question from {who} is no longer open.[/yellow]")
                    raise
                finally:
                    self._current = None

    async def _show(self, request: InputRequest) -> None:
        if request.refused is not None:
            self.console.print(f"[yellow]Not shown:[/yellow] {shown(request.refused)}")
            return
        print_request(self.console, request)
        if self.read is None:
            await self._answer(request, "decline")
            say(f"nerve: declined: {request.server} asked for input; run on a terminal to answer", sys.stderr)
            return
        action: InputAction | None
        try:
            if request.mode == "url":
                action = await self._choose(OPEN, OPENS, HOW_TO_OPEN)
            else:
                action = await self._fill(request)
        except _Stop:
            action = "cancel"
        if action is not None:
            await self._answer(request, action)

    async def _answer(
        self, request: InputRequest, action: InputAction, values: dict[str, Any] | None = None
    ) -> Answered | None:
        """Hand the answer over (`values`: a form sent); None (said so) when the request ended or is gone."""
        if (status := self._ended.get(request.request_id)) is not None:
            ended = shown(cards.ended_words(request, status))
            self.console.print(f"[yellow]The question ended meanwhile, so nothing was sent:[/yellow] {ended}")
            return None
        answer = Submit(values=values) if values is not None else ANSWERS[action]
        try:
            outcome = await self.agent.answer(request.request_id, self.user, answer)
        except AskError as exc:
            self.console.print(f"[yellow]{shown(exc.message)}[/yellow]")
            return None
        if outcome.note:
            self.console.print(f"[yellow]{shown(outcome.note)}[/yellow]")
        if outcome.resume:
            self._resume = outcome.resume[0]
        if outcome.changed and self.read is not None:  # a script is told on stderr instead
            self.console.print(f"[dim]{DONE[action]}[/dim]")
        return outcome

    async def _line(self, prompt: str) -> str:
        assert self.read is not None
        self._at_prompt = True
        try:
            line = await self.read(printable(prompt))
        finally:
            self._at_prompt = False
        if line is None:
            self.console.print()
            raise _Stop
        return line

    async def _fill(self, request: InputRequest) -> InputAction | None:
        """Ask the form field by field and send it (said so); the person's other choice, if any."""
        form = request.form or Form(fields=())
        values: dict[str, FieldValue | None] = {}
        fields = list(form.fields)
        while True:
            for field in fields:
                values[field.name] = await self._field(field)
            # What will be sent, field by field, before the person says send.
            for field in form.fields:
                value = values.get(field.name)
                value_shown = field.shown(value) if value is not None else "—"
                self.console.print(f"  [dim]{shown(field.title)}:[/dim] {shown(value_shown)}")
            action = await self._choose(SEND, SENDS, HOW_TO_SEND)
            if action != "accept":
                return action
            # The core checks the answers again and leaves out the fields left empty.
            outcome = await self._answer(request, "accept", dict(values))

            if outcome is None or not outcome.errors:
                return None
            # Refused as filled in: say why, and ask those fields again.
            for name, message in outcome.errors.items():
                self.console.print(f"  [red]{shown(name)}: {shown(message)}[/red]")
            fields = [field for field in form.fields if field.name in outcome.errors]

    async def _field(self, field: FormField) -> FieldValue | None:
        if field.description:
            self.console.print(f"  [dim]{shown(field.description)}[/dim]")
        prompt = field_prompt(field)
        while True:
            try:
                value = parse_field(field, await self._line(prompt))
            except FieldError as error:
                self.console.print(f"  [red]{shown(str(error))}[/red]")
                continue
            if value is not None or not field.required:
                return value
            self.console.print(f"  [red]{REQUIRED}[/red]")

    async def _choose(self, prompt: str, choices: dict[str, InputAction], how: str) -> InputAction:
        while (action := choices.get((await self._line(prompt)).strip().lower())) is None:
            self.console.print(how, markup=False)
        return action


def print_request(console: Console, request: InputRequest) -> None:
    """Who asks, for which call, until when, and the server's own words; for a link, its host first."""
    asking = f" for {shown(', '.join(request.tools))}" if request.tools else ""
    until = time.strftime("%H:%M", time.localtime(request.expires_at))
    when = f" (until {until})" if request.expires_at else ""
    what = "wants you to open a link" if request.mode == "url" else "asks you to fill in a form"
    console.print(f"[bold yellow]{shown(request.server)}[/bold yellow] {what}{asking}{when}.")
    if request.mode == "url":
        console.print(f"  Site: [bold reverse] {shown(link_host(request.url or ''))} [/bold reverse]")
        if request.message:
            console.print(f"  Why:  {shown(request.message)}")
        console.print(f"  Link: {shown(request.url or '')}", soft_wrap=True)
        return
    if request.message:
        console.print(f"  {shown(request.message)}")
    count = len(request.form.fields) if request.form else 0
    console.print(
        f"[dim]{count} field{'s' if count != 1 else ''}; * marks the required ones. Enter keeps the "
        "\\[default] or leaves a field empty; Ctrl-C cancels.[/dim]"
    )


def field_prompt(field: FormField) -> str:
    """`Title* (hint) [default]: `: what to type, on the line where it is typed."""
    hint = describe_field(field)
    if field.kind == "choices":
        hint += "; commas between"
    mark = "*" if field.required else ""
    default = f" [{field.shown(field.default)}]" if field.default is not None else ""
    return f"  {field.title}{mark} ({hint}){default}: "
