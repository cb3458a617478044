"""People's schedules as the front ends manage them, and the time zone each person reads them in.

The model's tools make schedules (`bot.schedules.tools`); what people and operators do with them
afterwards (list, pause, resume, cancel), the runners of their due slots and the zones their times are
shown in are one concern with one rule set (who may change what), kept here so the façade
(`bot.agent`) only hands them on and a front end cannot bypass those rules.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from typing import Literal

from bot.errors import ScheduleError
from bot.policy.platforms import Platforms
from bot.schedules.runner import CADENCE, ScheduleRunner
from bot.schedules.slots import Clock, Sleep, SlotJobs, Start
from bot.schedules.timing import zone
from bot.schedules.tools import ScheduleTools
from bot.schedules.zones import UTC_NAME, checked, local_time_zone
from bot.seams import TurnLock
from bot.store.person_settings import PersonSettingsLedger
from bot.store.schedules import ScheduleLedger
from bot.types import ConversationKey, Incoming, Person, Place, Schedule, ScheduleChange, ScheduleRun


class ScheduleDesk:
    """The schedules kept in `ledger` (None: no store keeps them) and people's zones in `settings`."""

    def __init__(
        self,
        ledger: ScheduleLedger | None,
        settings: PersonSettingsLedger | None,
        *,
        platforms: Platforms,
        admins: frozenset[str],
        locks: TurnLock,
        grace: float,
    ) -> None:
        self.ledger = ledger
        self._settings = settings
        self._platforms = platforms
        self._admins = admins
        self._locks = locks
        self._grace = grace
        # The runners started here, woken when a schedule is added so a near slot is not late.
        # (Weakly: a front end's runner that has stopped is not kept for good.)
        self._runners: weakref.WeakSet[ScheduleRunner] = weakref.WeakSet()

    async def time_zone_of(self, person: Person, hint: str | None = None) -> str:
        """The IANA zone `person`'s schedules are read and shown in: the one they set, else `hint` (the
        zone their platform reports for them, when it is a real one), else the platform's default
        (the machine's own on a platform without channels, the terminal), else UTC."""
        if self._settings is not None and (chosen := checked(await self._settings.time_zone(person.id))):
            return chosen
        if found := checked(hint):
            return found
        platform = self._platforms.get(person.platform)
        return local_time_zone() if platform is not None and not platform.channels else UTC_NAME

    async def set_time_zone(self, person: Person, name: str | None) -> str:
        """Set `person`'s zone (None or "": back to the default); the zone now in effect.
        `ScheduleError` (its message says what to write) when `name` is no IANA zone."""
        if self._settings is None:
            raise ScheduleError("time zones cannot be set here: there is no store", field="timezone")
        chosen = name.strip() if name and name.strip() else None
        if chosen is not None:
            zone(chosen)
        await self._settings.set_time_zone(person.id, chosen)
        return await self.time_zone_of(person)

    async def turn_zone(self, incoming: Incoming) -> str:
        """The zone of the person who wrote `incoming`: the schedule tools read times in it."""
        person = Person.of(incoming.key, incoming.user_id, self._platforms)
        return await self.time_zone_of(person, incoming.time_zone)

    async def schedules_of(self, owner: str) -> list[Schedule]:
        return await self.ledger.schedules_of(owner) if self.ledger is not None else []

    async def all_schedules(self) -> list[Schedule]:
        return await self.ledger.all_schedules() if self.ledger is not None else []

    async def schedule(self, schedule_id: str) -> Schedule | None:
        return await self.ledger.schedule(schedule_id.strip()) if self.ledger is not None else None

    async def runs_of(self, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        return await self.ledger.runs_of(schedule_id, limit) if self.ledger is not None else []

    async def cancel(self, schedule_id: str, by: Person) -> ScheduleChange:
        """Its person may, and an admin may (as with a place's memories), since a schedule posting in
        a shared place is the place's concern too. A run in flight finishes; no later slot is
        claimed (a claim needs an active schedule)."""
        return await self._change(schedule_id, by, "cancelled", ("active", "paused"), admin_may=True)

    async def pause(self, schedule_id: str, by: Person) -> ScheduleChange:
        return await self._change(schedule_id, by, "paused", ("active",), admin_may=False)

    async def resume(self, schedule_id: str, by: Person) -> ScheduleChange:
        """Slots that passed while it was paused stay unrun; the runners look at once for the next."""
        changed = await self._change(schedule_id, by, "active", ("paused",), admin_may=False)
        if changed == "changed":
            self.wake()
        return changed

    async def _change(
        self,
        schedule_id: str,
        by: Person,
        status: Literal["active", "paused", "cancelled"],
        from_statuses: tuple[str, ...],
        *,
        admin_may: bool,
    ) -> ScheduleChange:
        schedule = await self.schedule(schedule_id)
        if self.ledger is None or schedule is None or schedule.status not in from_statuses:
            return "gone"
        admin = admin_may and by.user_id in self._admins
        if schedule.owner != by.id and not admin:
            return "not_yours"
        changed = await self.ledger.set_schedule_status(schedule.id, status, by=by.id)
        return "changed" if changed else "gone"

    def runner(
        self,
        start: Start,
        *,
        mine: Callable[[Schedule], bool],
        grace: float | None = None,
        clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep,
        cadence: float = CADENCE,
        jobs: SlotJobs | None = None,
    ) -> ScheduleRunner:
        """A runner of the schedules `mine` accepts, whose due slots `start` runs. Its runs are held
        under the store's turn lock, so runners in other processes on the store tell them from
        abandoned ones. With `jobs` (PostgreSQL: `adapters.jobs_runtime.slot_jobs`) each due slot is
        queued as a job that any process's worker runs through the runner's `run_slot`. The grace is
        the configured one (NERVE_SCHEDULE_GRACE) unless given; a test passes its own `clock` and
        `sleep`. It is woken whenever a schedule is added or resumed here."""
        if self.ledger is None:
            raise RuntimeError("this nerve has no store for schedules")
        runner = ScheduleRunner(
            self.ledger,
            start,
            locks=self._locks,
            clock=clock,
            sleep=sleep,
            grace=self._grace if grace is None else grace,
            cadence=cadence,
            mine=mine,
            jobs=jobs,
        )
        self._runners.add(runner)
        return runner

    def tools(
        self, ledger: ScheduleLedger | None, *, clock: Clock, per_person: int, runs_on: frozenset[str] | None
    ) -> ScheduleTools | None:
        """The built-in schedule tools over `ledger`: they read times in their person's zone, confirm
        a once schedule late within the grace, and wake the runners for each schedule added. None
        without a ledger, and the façade gives none where nobody can be asked, since nothing is
        scheduled without its person's confirmation."""
        if ledger is None:
            return None
        return ScheduleTools(
            ledger,
            platforms=self._platforms,
            zone_of=self.turn_zone,
            clock=clock,
            per_person=per_person,
            confirm_late=self._grace,
            on_added=lambda _schedule: self.wake(),
            runs_on=runs_on,
        )

    def wake(self) -> None:
        """A schedule was added or resumed: the runners look at once, so a near slot is not late."""
        for runner in self._runners:
            runner.wake.set()

    async def run(self, schedule_id: str, slot: float) -> ScheduleRun | None:
        return await self.ledger.run(schedule_id, slot) if self.ledger is not None else None

    async def keep_run_message(self, schedule_id: str, slot: float, message: str) -> bool:
        """Kept as soon as the run posts it: a run handed on after its process stopped then answers
        under it instead of posting again."""
        if self.ledger is None:
            return False
        return await self.ledger.set_run_message(schedule_id, slot, message)


def scheduled_incoming(
    schedule: Schedule,
    slot: float,
    *,
    key: ConversationKey | None = None,
    place: Place | None = None,
    time_zone: str | None = None,
) -> Incoming:
    """The message one due slot's turn starts with (`Agent.run_scheduled`): the schedule's prompt as
    its person's, with the slot's delivery id; `place` where the front end knows it better than the
    key says (a DM), `time_zone` the zone the person's platform reports. It is answered in `key` (a
    channel run's own thread under the message it posted), by default where the schedule was made.
    The delivery id being the slot's, a turn started again for one slot (handed on after its process
    stopped) goes on in the same message rather than storing a second."""
    return Incoming(
        key=key or schedule.key,
        text=schedule.prompt,
        user_id=schedule.owner_user,
        event_id=f"schedule:{schedule.id}:{slot:.0f}",
        place=place,
        scheduled=schedule.id,
        replayed=True,
        time_zone=time_zone,
    )
