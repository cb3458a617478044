"""The terminal's schedules: `/schedules` to list and change the person's own, and, while the chat is
open, their due slots run (each exactly once, by the core's runner) with the answer printed between
prompts.

An answer that arrives while the person is at the chat's prompt is printed above it through
prompt_toolkit (`run_in_terminal`), which redraws the prompt and what was typed; one that arrives
during a turn waits until that turn has been answered. A run that waits for a decision is taken up
by the chat before its next prompt (an Enter at an empty prompt is enough).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from prompt_toolkit.application import get_app_or_none, run_in_terminal
from rich.console import Console

from adapters.common.schedules import (
    CHANGES,
    NO_SCHEDULES,
    change_schedule,
    late_note,
    place_of,
    scheduled_note,
    views_of,
)
from adapters.terminal.safe import shown
from adapters.terminal.views import print_reply
from bot.agent import RunOutcome, local_time
from bot.types import AgentReply, ConversationKey, Person, Schedule

if TYPE_CHECKING:
    from bot.agent import Agent, Tick

logger = logging.getLogger(__name__)

COMMAND = "/schedules"
USAGE = "/schedules lists yours; /schedules cancel ID, /schedules pause ID, /schedules resume ID change one."


async def schedules_command(
    agent: Agent, person: Person, argument: str, console: Console, now: float
) -> None:
    """`/schedules [cancel|pause|resume ID]`: only the person's own (an admin cancels others' on
    the platforms, or with `nerve schedules cancel`)."""
    said = argument.split()
    if not said:
        views = await views_of(agent, person.id, now)
        if not views:
            console.print(NO_SCHEDULES, markup=False)
            return
        for view in views:
            console.print(view.line(), markup=False)
        console.print(f"[dim]{shown(USAGE)}[/dim]")
        return
    if len(said) != 2 or said[0].lower() not in CHANGES:
        console.print(USAGE, markup=False)
        return
    console.print(await change_schedule(agent, said[0].lower(), said[1], person, COMMAND), markup=False)


@dataclass(frozen=True, slots=True)
class _Answered:
    schedule: Schedule
    slot: float
    late_by: float
    reply: AgentReply


class TerminalSchedules:
    """Runs the schedules of this terminal's person while the chat is open (`running`)."""

    def __init__(
        self,
        agent: Agent,
        key: ConversationKey,
        console: Console,
        *,
        grace: float,
        ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._agent = agent
        self._key = key
        self._user = key.workspace
        self._console = console
        self._grace = grace
        self._ready = ready
        # Set while the chat waits at its own prompt: an answer may then be printed above it.
        self.at_prompt = False
        # What is printed at the next chance (answers, notes), and the parked runs the chat takes up
        # before its next prompt.
        self._unprinted: list[Callable[[], None]] = []
        self._parked: list[AgentReply] = []
        self._first_look = True

    def _mine(self, schedule: Schedule) -> bool:
        key = schedule.key
        return key.platform == self._key.platform and key.workspace == self._key.workspace

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the due slots until the block ends; a run still under way then is left to be handed on
        at the next start."""
        runner = self._agent.schedule_runner(self._start, mine=self._mine, grace=self._grace)
        forever = asyncio.create_task(runner.run_forever(self._looked), name="schedules")
        try:
            yield
        finally:
            forever.cancel()
            await asyncio.gather(forever, return_exceptions=True)

    async def _looked(self, found: Tick) -> None:
        """At start: which runs were under way when nerve stopped (they go on now), which slots passed
        while nerve was not running, and which run late now."""
        for taken in found.handed_on:
            await self._say(
                f"[yellow]The run of {shown(taken.schedule.id)} due"
                f" {shown(local_time(taken.slot, taken.schedule.timezone))} was under way when nerve"
                " stopped:[/yellow] it goes on now."
            )
        if found.handed_on:
            return
        first, self._first_look = self._first_look, False
        # One line per schedule, however many of its slots passed: a month away from a schedule
        # every five minutes is thousands of them.
        by_schedule: dict[str, tuple[Schedule, list[float]]] = {}
        for schedule, slot in found.missed:
            by_schedule.setdefault(schedule.id, (schedule, []))[1].append(slot)
        for schedule, slots in by_schedule.values():
            when = shown(local_time(slots[-1], schedule.timezone))
            also = f" and {len(slots) - 1} earlier" if len(slots) > 1 else ""
            await self._say(
                f"[yellow]Missed while nerve was not running:[/yellow] {shown(schedule.id)}"
                f" {shown(repr(schedule.prompt))}, due {when}{also}."
            )
        if first:
            for started in found.started:
                note = late_note(started.slot, started.late_by, started.schedule.timezone)
                if note is not None:
                    await self._say(
                        f"[yellow]Running late:[/yellow] {shown(started.schedule.id)}"
                        f" {shown(repr(started.schedule.prompt))} ({shown(note)})."
                    )

    async def _start(self, schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        """The runner's part: the turn, as the person in the schedule's thread; then its answer shown."""
        if self._ready is not None:  # the MCP servers' first attempts, as a typed question waits for them
            await self._ready()
        reply = await self._agent.run_scheduled(schedule, slot)
        answered = _Answered(schedule, slot, late_by, reply)
        await self._show(lambda: self._print(answered))
        if reply.failed:
            return RunOutcome("failed", "the model service failed")
        if reply.waiting:
            return RunOutcome("answered", "waits for a decision in the chat")
        return RunOutcome("answered")

    def take_parked(self) -> list[AgentReply]:
        """The runs that wait for the person's decision, for the chat to ask about (once each)."""
        parked, self._parked = self._parked, []
        return parked

    async def _show(self, draw: Callable[[], None]) -> None:
        """Draw now when the chat is at its prompt; else once the turn under way has been answered."""
        self._unprinted.append(draw)
        if self.at_prompt:
            await self.flush()

    async def flush(self) -> None:
        """Print what arrived (above the prompt when it is shown)."""
        while self._unprinted:
            await _above_prompt(self._unprinted.pop(0))

    def _print(self, answered: _Answered) -> None:
        schedule, console = answered.schedule, self._console
        where = "" if schedule.key == self._key else f" in {place_of(schedule)}"
        console.print(f"[bold cyan]Scheduled{shown(where)}:[/bold cyan] {shown(schedule.prompt)}")
        reply = answered.reply
        if reply.waiting:
            self._parked.append(reply)
            console.print("[yellow]It waits for your decision:[/yellow] press Enter to decide.")
        else:
            print_reply(console, reply)
        notes = [scheduled_note(schedule.id, COMMAND)]
        if (late := late_note(answered.slot, answered.late_by, schedule.timezone)) is not None:
            notes.insert(0, late)
        console.print(f"[dim]{shown(' · '.join(notes))}[/dim]")

    async def _say(self, markup: str) -> None:
        await self._show(lambda: self._console.print(markup))


async def _above_prompt(draw: Callable[[], None]) -> None:
    """Draw above the chat's prompt when it is shown (it is drawn again below), else where we are."""
    app = get_app_or_none()
    if app is not None and app.is_running:
        await run_in_terminal(draw)
    else:
        draw()
