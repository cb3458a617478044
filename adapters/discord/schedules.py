"""Schedules on Discord: their due runs, `/schedules` and `/timezone`.

`DiscordSchedules` runs the Discord schedules' due slots (each exactly once, by the core's runner)
while the bot is up. A run of a schedule made in a DM answers in the DM; one made in a guild posts a
new message in the channel that calls its person ("⏰ Scheduled for @ada: …") and answers in a thread
started on it, as that person (their scopes, memories and approvals: a write waits for them, and
they are called to decide). The runner may start one slot twice (a run handed on after its process
stopped), so the message posted is kept with the run as soon as it is out and used again, and the
answer goes on in the messages the run before posted (the posts ledger), never a second copy.

`/schedules` lists the person's own (only to them) and cancels, pauses or resumes one by its id;
`/timezone` shows, sets or resets the zone their schedules are read in.
"""

from __future__ import annotations

import functools
import logging
import time
import zoneinfo
from dataclasses import KW_ONLY, dataclass
from typing import Any

import discord
from discord import app_commands

from adapters.common import refs
from adapters.common.schedules import (
    CHANGES,
    NO_SCHEDULES,
    ScheduleView,
    change_schedule,
    last_run_text,
    late_note,
    next_run_text,
    place_of,
    scheduled_note,
    time_zone_command,
    views_of,
)
from adapters.discord.answering import TurnAnswers
from adapters.discord.commands import CHOICE_CHARS, CHOICES, asked_here, choices, slash
from adapters.discord.delivery import (
    ChannelGuard,
    ConversationOrder,
    only,
    parse_message_ref,
    send_message,
    tell,
)
from adapters.discord.incoming import DM_WORKSPACE, PLATFORM, Job, thread_key
from adapters.discord.incoming import place_of as place_where
from adapters.discord.render import MESSAGE_LIMIT, escape_text
from bot.agent import Agent, PostRecords, RunOutcome, ScheduleRunner, SlotJobs
from bot.text import split_markdown, truncate
from bot.types import AgentReply, ConversationKey, Person, Schedule

logger = logging.getLogger(__name__)

COMMAND = "/schedules"
USAGE = "-# `/schedules action:cancel schedule:ID` cancels one; `pause` and `resume` likewise."
NEED_ID = "Name the schedule too: `/schedules action:{action} schedule:ID` (`/schedules` lists their ids)."
WAITS = "{who} this scheduled run waits for your decision above."
# How the shared answer of `/timezone` writes the command, as Discord takes it.
TIMEZONE = "/timezone zone:"
SCHEDULES_TASK = "discord-schedules"


def announcement(schedule: Schedule) -> str:
    """The channel message a guild schedule's run answers under (in its thread)."""
    prompt = truncate(" ".join(schedule.prompt.split()), MESSAGE_LIMIT - 100)[0]
    return f"⏰ Scheduled for <@{schedule.owner_user}>: {escape_text(prompt)}"


@dataclass(frozen=True, slots=True)
class _Where:
    """Where a run answers: its conversation, the channel its messages go to, and the message its
    first one replies to (the announcement, when no thread could be started on it)."""

    key: ConversationKey
    channel_id: int
    reply_to: int = 0


def run_nonce(schedule_id: str, slot: float) -> str:
    """The nonce of a run's announcement: one per (schedule, slot), within Discord's 25 characters."""
    return f"{schedule_id}:{slot:.0f}"[:25]


@dataclass(eq=False)
class DiscordSchedules:
    """The runner of the Discord schedules for one client (`run_forever` in a task it owns)."""

    _: KW_ONLY
    agent: Agent
    client: discord.Client
    answers: TurnAnswers
    guard: ChannelGuard
    order: ConversationOrder
    # NERVE_SCHEDULE_GRACE: a slot missed by at most this many seconds still runs, late.
    grace: float
    # With PostgreSQL, the slot jobs the `nerve discord` processes share: a due slot is queued, and
    # whichever process's worker is free runs it (`run_slot`); None on SQLite (run here).
    jobs: SlotJobs | None = None
    # Made once the bot is ready (or a slot's job comes first).
    runner: ScheduleRunner | None = None

    @staticmethod
    def mine(schedule: Schedule) -> bool:
        return schedule.key.platform == PLATFORM

    async def run_forever(self) -> None:
        """Once the bot is ready: look for due slots until cancelled (the bot's close); a run under way
        then is handed on at the next start, in the same messages."""
        await self.client.wait_until_ready()
        if not self.agent.schedules_on:
            return
        await self._runner().run_forever()

    def _runner(self) -> ScheduleRunner:
        if self.runner is None:
            self.runner = self.agent.schedule_runner(
                self.start, mine=self.mine, grace=self.grace, jobs=self.jobs
            )
        return self.runner

    async def run_slot(self, schedule_id: str, slot: float) -> None:
        """The job of one slot (PostgreSQL), in whichever `nerve discord` process's worker took it,
        once this bot can post."""
        await self.client.wait_until_ready()
        await self._runner().run_slot(schedule_id, slot)

    async def start(self, schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        """The runner's part: one slot's turn, as the schedule's person, answered where it belongs."""
        where = await self._where(schedule, slot)
        if where is None:
            return RunOutcome("failed", f"could not post in channel {schedule.key.channel}")
        notes = [scheduled_note(schedule.id, COMMAND)]
        if (late := late_note(slot, late_by, schedule.timezone)) is not None:
            notes.insert(0, late)
        job = Job(
            kind="schedule",
            key=where.key,
            text=schedule.prompt,
            user_id=schedule.owner_user,
            user_name="",
            event_id=f"schedule:{schedule.id}:{slot:.0f}",
            channel_id=where.channel_id,
            message_id=where.reply_to,
            open_thread=False,
        )
        place = place_where(where.key, schedule.owner_user)
        inbox = self.agent.inbox
        records = inbox if isinstance(inbox, PostRecords) else None
        async with self.order.hold(where.key):
            reply = await self.answers.run_turn(
                job,
                lambda progress: self.agent.run_scheduled(
                    schedule, slot, progress, key=where.key, place=place
                ),
                records=records,
                note=" · ".join(notes),
            )
            if reply.waiting:
                await self._call(schedule, where, notes)
        return outcome(reply)

    async def _where(self, schedule: Schedule, slot: float) -> _Where | None:
        """A DM's run answers in the DM. A guild's posts its announcement in the schedule's channel,
        once per slot (kept with the run at once, read back when the run is handed on), and answers
        in a thread on it; None when nothing could be posted."""
        key = schedule.key
        if key.workspace == DM_WORKSPACE:
            return _Where(key, int(key.channel))
        channel_id, guild_id = int(key.channel), int(key.workspace)
        run = await self.agent.schedule_run(schedule.id, slot)
        posted = parse_message_ref(run.message if run is not None else None)
        if posted is None:
            channel = self.client.get_partial_messageable(channel_id, guild_id=guild_id)
            message = await send_message(
                channel,
                announcement(schedule),
                guard=self.guard,
                channel_id=channel_id,
                mentions=only(schedule.owner_user),
                # A run handed on after its process stopped between posting and keeping the post
                # gets that post back from Discord (it enforces the nonce), never a second one.
                nonce=run_nonce(schedule.id, slot),
            )
            if message is None:
                return None
            posted = (channel_id, message.id)
            await self.agent.keep_run_message(schedule.id, slot, refs.message_ref(*posted))
        channel_id, message_id = posted
        key = thread_key(guild_id, channel_id, message_id)
        if await self.answers.open_thread(channel_id, message_id, schedule.prompt):
            return _Where(key, message_id)  # a thread started on a message has the message's id
        return _Where(key, channel_id, reply_to=message_id)

    async def _call(self, schedule: Schedule, where: _Where, notes: list[str]) -> None:
        """A parked run: its person is called to decide (nobody else is pinged), under the request."""
        channel = self.client.get_partial_messageable(where.channel_id)
        text = WAITS.format(who=f"<@{schedule.owner_user}>") + f"\n-# {' · '.join(notes)}"
        mentions = only(schedule.owner_user)
        await send_message(channel, text, guard=self.guard, channel_id=where.channel_id, mentions=mentions)


def outcome(reply: AgentReply) -> RunOutcome:
    if reply.failed:
        return RunOutcome("failed", "the model service failed")
    if reply.waiting:
        return RunOutcome("answered", "waits for a decision")
    return RunOutcome("answered")


# --- /schedules and /timezone ------------------------------------------------------------------------


def schedule_line(view: ScheduleView) -> str:
    """One schedule as `/schedules` shows it: its id, status, prompt, place, next and last run."""
    s = view.schedule
    prompt = escape_text(truncate(" ".join(s.prompt.split()), 200)[0])
    where = escape_text(f"{place_of(s)}, {view.repeats} ({s.timezone})")
    runs = escape_text(f"next: {next_run_text(s, view.now)}; last: {last_run_text(view.last, s.timezone)}")
    return f"• `{s.id}` **{s.status}** {prompt} — {where}\n  {runs}"


def schedules_text(views: list[ScheduleView]) -> list[str]:
    if not views:
        return [NO_SCHEDULES]
    lines = ["**Your schedules**", *(schedule_line(view) for view in views), USAGE]
    return split_markdown("\n".join(lines), MESSAGE_LIMIT)


async def schedules_answer(
    agent: Agent, person: Person, action: str | None, schedule: str | None
) -> list[str]:
    """`/schedules`: the person's list; with an action, that change to their schedule named."""
    if action is None:
        return schedules_text(await views_of(agent, person.id, time.time()))
    if not schedule or not schedule.strip():
        return [NEED_ID.format(action=action)]
    return [escape_text(await change_schedule(agent, action, schedule.strip(), person, COMMAND))]


def id_choices(found: list[Schedule], typed: str) -> list[app_commands.Choice[str]]:
    """The person's schedules whose id or prompt holds what was typed, each named by both."""
    named = [(s.id, truncate(f"{s.id} — {' '.join(s.prompt.split())}", CHOICE_CHARS)[0]) for s in found]
    held = [(value, name) for value, name in named if typed in name.lower()]
    return [app_commands.Choice(name=name, value=value) for value, name in held[:CHOICES]]


@functools.cache
def zone_names() -> list[str]:
    return sorted(zoneinfo.available_timezones())


def register(tree: app_commands.CommandTree[Any], agent: Agent) -> None:
    """Add /schedules and /timezone to the bot's tree (synced with the others in `setup_hook`)."""

    def who(interaction: discord.Interaction[Any]) -> Person:
        here = asked_here(interaction)
        return agent.person(here.key, here.user_id)

    @slash(tree, "schedules")
    @app_commands.choices(action=[app_commands.Choice(name=action, value=action) for action in CHANGES])
    async def schedules(
        interaction: discord.Interaction[Any], action: str | None = None, schedule: str | None = None
    ) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        for text in await schedules_answer(agent, who(interaction), action, schedule):
            await tell(interaction, text)

    @schedules.autocomplete("schedule")
    async def schedule_ids(
        interaction: discord.Interaction[Any], current: str
    ) -> list[app_commands.Choice[str]]:
        return id_choices(await agent.schedules_of(who(interaction).id), current.strip().lower())

    @slash(tree, "timezone")
    async def timezone(interaction: discord.Interaction[Any], zone: str | None = None) -> None:
        await interaction.response.defer(ephemeral=True, thinking=True)
        said = await time_zone_command(agent, who(interaction), zone or "", TIMEZONE, now=time.time())
        await tell(interaction, escape_text(said))

    @timezone.autocomplete("zone")
    async def zones(interaction: discord.Interaction[Any], current: str) -> list[app_commands.Choice[str]]:
        return choices(zone_names(), current.strip())
