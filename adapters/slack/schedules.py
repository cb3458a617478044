"""Schedules on Slack: their due runs, `/nerve schedules` (with Pause, Resume and Cancel buttons) and
`/nerve timezone`.

A run answers where its schedule was made, as its person, through the same turn path as a mention
(`TurnRunner`): in a DM in the DM; in a channel under a new message naming the person and the
prompt, in that message's thread. The core's runner may start one slot twice (a run handed on after
its process stopped), so the message is kept with the run as soon as it is posted and a second start
answers under it; the turn itself goes on in the same stored message (its delivery id is the slot's)
and each part of its answer is posted once (`TurnPosts`).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from adapters.common.refs import message_ref, parse_message_ref
from adapters.common.schedules import (
    CHANGES,
    NO_SCHEDULES,
    ScheduleView,
    change_schedule,
    late_note,
    scheduled_note,
    time_zone_command,
    views_of,
)
from adapters.slack.approval_view import person
from adapters.slack.clicks import tell_presser
from adapters.slack.commands import SHOWN_CHARS
from adapters.slack.events import PLATFORM, Turn, is_dm_channel, turn_in, typed_in
from adapters.slack.post import Poster, TurnPosts
from adapters.slack.render import (
    MAX_BLOCKS,
    OutMessage,
    button,
    confirmed,
    context,
    escape,
    escape_capped,
    section,
)
from adapters.slack.turns import TurnRunner
from adapters.slack.zones import UserZones
from bot.agent import Agent, PostRecords, RunOutcome, ScheduleRunner, SlotJobs, scheduled_incoming
from bot.types import AgentReply, Incoming, Person, Place, Progress, Schedule

logger = logging.getLogger(__name__)

COMMAND = "/nerve schedules"
USAGE = "Also: `/nerve schedules cancel ID`, `/nerve schedules pause ID`, `/nerve schedules resume ID`."
FAILED = "Sorry — something went wrong on my side with your schedules; please try again."
SCHEDULE_ACTION = "nerve_schedule"
SCHEDULE_ACTIONS = re.compile(rf"^{SCHEDULE_ACTION}\.")
ZONE_COMMAND = "/nerve timezone"
# The part of a run's posts that is its message in the channel (`TurnPosts`).
ANNOUNCEMENT = "announcement"


def announcement(schedule: Schedule) -> OutMessage:
    """The channel message a run answers under: whose schedule it is, and its prompt."""
    prompt = escape_capped(schedule.prompt, SHOWN_CHARS)
    return OutMessage(text=f"⏰ Scheduled for {person(schedule.owner_user)}: {prompt}", blocks=[])


def noted(reply: AgentReply, schedule: Schedule, slot: float, late_by: float) -> AgentReply:
    """The answer with the notes a scheduled run carries: late by how much, and how to stop it."""
    notes = [scheduled_note(schedule.id, COMMAND)]
    if (late := late_note(slot, late_by, schedule.timezone)) is not None:
        notes.insert(0, late)
    return replace(reply, text=f"{reply.text.rstrip()}\n\n_{' · '.join(notes)}_")


def _item(view: ScheduleView) -> list[dict[str, Any]]:
    schedule = view.schedule
    pause = ("Resume", "resume") if schedule.status == "paused" else ("Pause", "pause")
    cancel = button("Cancel", f"{SCHEDULE_ACTION}.cancel", schedule.id, "danger")
    question = f"Stop {schedule.id} for good? It will not run again."
    buttons = [
        button(pause[0], f"{SCHEDULE_ACTION}.{pause[1]}", schedule.id),
        confirmed(cancel, "Cancel this schedule?", question, "Cancel it", "Keep it"),
    ]
    return [section(escape(view.line())), {"type": "actions", "elements": buttons}]


def schedules_message(views: list[ScheduleView]) -> tuple[str, list[dict[str, Any]]]:
    """`/nerve schedules`: the person's schedules, each with its next and last run and its buttons."""
    if not views:
        return NO_SCHEDULES, []
    blocks: list[dict[str, Any]] = [section("*Your schedules*")]
    left_out = 0
    for view in views:
        item = _item(view)
        if len(blocks) + len(item) > MAX_BLOCKS - 2:  # two stay for what was left out and the hint
            left_out += 1
            continue
        blocks += item
    if left_out:
        blocks.append(context(f"{left_out} more not shown here: change some by their ids."))
    blocks.append(context(USAGE))
    return f"Your schedules: {len(views)}", blocks


# Seconds `/nerve timezone` waits for the person's Slack profile before answering without it.
PROFILE_WAIT = 1.5


@dataclass(eq=False)
class SlackSchedules:
    """One bot's schedules: the runner of Slack's due slots while the bot runs, and the commands."""

    agent: Agent
    poster: Poster
    turns: TurnRunner
    zones: UserZones
    _: KW_ONLY
    # Seconds after its time a slot nothing ran is still run, late (NERVE_SCHEDULE_GRACE).
    grace: float
    # With PostgreSQL, the slot jobs every process shares: a due slot is queued, and whichever
    # process's worker is free runs it (`run_slot`); None on SQLite, where the runner runs it here.
    jobs: SlotJobs | None = None
    runner: ScheduleRunner | None = field(default=None, init=False)
    _forever: asyncio.Task[None] | None = field(default=None, init=False)
    _stopping: bool = field(default=False, init=False)

    # --- running ------------------------------------------------------------------------------

    def start(
        self,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        forever: bool = True,
    ) -> ScheduleRunner:
        """Run Slack's due slots from now on (a test passes its clock and sleep, or looks itself)."""
        if self.runner is None:
            self.runner = self.agent.schedule_runner(
                self.run, mine=self._mine, grace=self.grace, clock=clock, sleep=sleep, jobs=self.jobs
            )
        if forever and self._forever is None:
            self._forever = asyncio.create_task(self.runner.run_forever(), name="slack-schedules")
        return self.runner

    async def run_slot(self, schedule_id: str, slot: float) -> None:
        """The job of one slot (PostgreSQL), in whichever process's worker took it, `nerve worker`'s
        included: the runner there need not be looking itself."""
        await self.start(forever=False).run_slot(schedule_id, slot)

    def _mine(self, schedule: Schedule) -> bool:
        return schedule.key.platform == PLATFORM and not self._stopping

    async def settle(self, grace: float) -> None:
        """SIGTERM: claim no new slot, and give the runs under way up to `grace` seconds."""
        self._stopping = True
        if self.runner is not None:
            try:
                async with asyncio.timeout(grace):
                    await self.runner.wait_for_runs()
            except TimeoutError:
                logger.warning(
                    "scheduled runs still under way after %g s: handed on at the next start", grace
                )

    async def stop(self) -> None:
        """Stop looking; the runs still under way are left to be handed on at the next start."""
        self._stopping = True
        forever, self._forever = self._forever, None
        if forever is not None:
            forever.cancel()
            await asyncio.gather(forever, return_exceptions=True)
        elif self.runner is not None:
            await self.runner.stop()

    async def run(self, schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        """The runner's part, for one slot, as often as it is called: in a DM the turn answers in the
        DM; in a channel under one message, posted at the first call and kept with the run."""
        async with self.turns.enter(schedule.key.workspace):  # its workspace's token, for every call
            return await self._run(schedule, slot, late_by)

    async def _run(self, schedule: Schedule, slot: float, late_by: float) -> RunOutcome:
        key, dm = schedule.key, is_dm_channel(schedule.key.channel)
        if not dm:
            key = replace(key, thread=await self._announced(schedule, slot))
        owner, team = schedule.owner_user, key.workspace or None
        place = Place(platform=PLATFORM, channel=key.channel, dm=dm, user=owner, team=team)
        zone = await self.zones.of(schedule.owner_user)
        incoming = scheduled_incoming(schedule, slot, key=key, place=place, time_zone=zone)

        async def answer(progress: Progress) -> AgentReply:
            reply = await self.agent.run_scheduled(
                schedule, slot, progress, key=key, place=place, time_zone=zone
            )
            return noted(reply, schedule, slot, late_by)

        reply = await self.turns.answer(turn_in(incoming), answer)
        if reply is None or reply.failed:
            return RunOutcome("failed", "the answer could not be given (see the log)")
        if reply.waiting or reply.deferred:
            return RunOutcome("answered", "waits for a decision in its thread")
        return RunOutcome("answered")

    async def _announced(self, schedule: Schedule, slot: float) -> str:
        """The ts of the run's message in the channel: the one kept with the run; else one an earlier
        start posted but could not keep (it stopped in between: the post was announced in the store
        first, and is found again by its metadata); else a new one."""
        run = await self.agent.schedule_run(schedule.id, slot)
        kept = parse_message_ref(run.message if run is not None else None)
        if kept is not None:
            return kept[1]
        channel = schedule.key.channel
        inbox = self.agent.inbox
        top = Turn(
            incoming=scheduled_incoming(schedule, slot),
            kind="answer",
            channel=channel,
            reply_thread_ts=None,
            assistant_thread=False,
        )
        posts = TurnPosts(inbox if isinstance(inbox, PostRecords) else None, self.poster, top)
        await posts.load()
        if posts.records is None:
            ts: str | None = await self.poster.post(channel, None, announcement(schedule))
        else:
            await posts.put(ANNOUNCEMENT, announcement(schedule))
            ts = await posts.landed(ANNOUNCEMENT)
        assert ts is not None, "a part put is landed"
        await self.agent.keep_run_message(schedule.id, slot, message_ref(channel, ts))
        return ts

    # --- commands and buttons -----------------------------------------------------------------

    def _person(self, here: Incoming) -> Person:
        return self.agent.person(here.key, here.user_id)

    async def on_command(self, ack: AsyncAck, command: Mapping[str, Any], typed: list[str]) -> None:
        """`/nerve schedules [cancel|pause|resume ID]`, answered to its person alone."""
        here, said = typed_in(command), typed[1:]
        who = self._person(here)
        try:
            if not said:
                text, blocks = schedules_message(await views_of(self.agent, who.id, time.time()))
            elif len(said) == 2 and said[0].lower() in CHANGES:
                changed = await change_schedule(self.agent, said[0].lower(), said[1], who, COMMAND)
                text, blocks = escape(changed), []
            else:
                text, blocks = f"`/nerve schedules` lists yours. {USAGE}", []
        except Exception:
            logger.exception("/nerve schedules failed for %s", here.user_id)
            text, blocks = FAILED, []
        await ack(text=text, blocks=blocks, response_type="ephemeral")

    async def on_timezone(self, ack: AsyncAck, command: Mapping[str, Any], typed: list[str]) -> None:
        """`/nerve timezone [ZONE|reset]`: the zone the person's schedules are read in, or set it; the
        zone their Slack profile names is the default."""
        here = typed_in(command)
        try:
            try:
                # The answer is the command's acknowledgement, due within Slack's 3 seconds: a slow
                # or rate-limited profile lookup costs the hint, never the answer.
                async with asyncio.timeout(PROFILE_WAIT):
                    hint = await self.zones.of(here.user_id)
            except TimeoutError:
                hint = None
            argument = " ".join(typed[1:])
            text = await time_zone_command(
                self.agent, self._person(here), argument, ZONE_COMMAND, hint=hint, now=time.time()
            )
        except Exception:
            logger.exception("/nerve timezone failed for %s", here.user_id)
            text = FAILED
        await ack(text=escape(text), response_type="ephemeral")

    async def on_click(self, body: Mapping[str, Any]) -> None:
        """A schedule's button (already acked); what it did is told to the presser alone."""
        await tell_presser(self.poster, body, SCHEDULE_ACTION, self._clicked, FAILED)

    async def _clicked(self, here: Incoming, action: str, schedule_id: str) -> str:
        if action not in CHANGES:
            logger.warning("ignored a schedule button that is not one of ours: %s", action)
            return FAILED
        return await change_schedule(self.agent, action, schedule_id, self._person(here), COMMAND)
