"""Schedules and their runs: each slot claimed exactly once, whichever process asks first.

A slot is claimed by inserting its row in `schedule_runs`, whose key is (schedule_id, slot): one
INSERT … SELECT … ON CONFLICT DO NOTHING, inserted only while the schedule is active, so across any
number of processes, restarts and re-deliveries one caller gets True and runs it. A slot recorded
missed holds the same key, so it can never be run later.

Instants are UTC epoch seconds passed in by the caller (`at`), so a test's fake clock and the
runner's real one write the same rows (only a status change without `at` reads the clock).

A once schedule (rule "") becomes "done" here as its only slot is finished or recorded missed; a
recurring one stays active until a person cancels it (or its rule runs out, which the runner sees
as no next slot).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from bot.store.dialect import Ledger
from bot.types import ConversationKey, RunStatus, Schedule, ScheduleRun, ScheduleStatus

# Who ended a once schedule whose slot was run or missed.
ENDED_BY_NERVE = "nerve"
# The statuses of a schedule still in effect (counted against its person's limit, listed by default).
_LIVE = "('active', 'paused')"

_COLUMNS = (
    "id, owner, owner_user, platform, workspace, channel, thread, place, prompt, first_at, rule,"
    " timezone, status, created_at, last_slot, last_outcome, changed_by, changed_at"
)
_MARKS = ", ".join("?" for _ in _COLUMNS.split(","))
_RUN_COLUMNS = "schedule_id, slot, status, started_at, finished_at, late_by, note, message, hand_ons"


def new_schedule_id() -> str:
    """Short enough for a person to type (`cancel s3f9a2c1`), random enough never to collide."""
    return "s" + secrets.token_hex(4)


def _schedule(row: Any) -> Schedule:
    (id_, owner, owner_user, platform, workspace, channel, thread, place, prompt, first_at, rule) = row[:11]
    timezone, status, created_at, last_slot, last_outcome, changed_by, changed_at = row[11:18]
    return Schedule(
        id=id_,
        owner=owner,
        owner_user=owner_user,
        key=ConversationKey(platform=platform, workspace=workspace, channel=channel, thread=thread),
        place=place,
        prompt=prompt,
        first_at=float(first_at),
        rule=rule,
        timezone=timezone,
        status=status,
        created_at=float(created_at),
        last_slot=None if last_slot is None else float(last_slot),
        last_outcome=last_outcome,
        changed_by=changed_by,
        changed_at=None if changed_at is None else float(changed_at),
    )


def _run(row: Any) -> ScheduleRun:
    schedule_id, slot, status, started_at, finished_at, late_by, note, message, hand_ons = row[:9]
    return ScheduleRun(
        schedule_id=schedule_id,
        slot=float(slot),
        status=status,
        started_at=float(started_at),
        finished_at=None if finished_at is None else float(finished_at),
        late_by=float(late_by),
        note=note,
        message=message,
        hand_ons=int(hand_ons),
    )


class ScheduleLedger(Ledger):
    async def add_schedule(self, schedule: Schedule) -> None:
        """Store a schedule as given (its id from `new_schedule_id`); its runs start empty."""
        key = schedule.key
        await self._change(
            f"INSERT INTO schedules ({_COLUMNS}) VALUES ({', '.join('?' * 18)})",
            (
                schedule.id,
                schedule.owner,
                schedule.owner_user,
                key.platform,
                key.workspace,
                key.channel,
                key.thread,
                schedule.place,
                schedule.prompt,
                schedule.first_at,
                schedule.rule,
                schedule.timezone,
                schedule.status,
                schedule.created_at,
                schedule.last_slot,
                schedule.last_outcome,
                schedule.changed_by,
                schedule.changed_at,
            ),
        )

    async def schedule(self, schedule_id: str) -> Schedule | None:
        row = await self._first(f"SELECT {_COLUMNS} FROM schedules WHERE id = ?", (schedule_id,))
        return _schedule(row) if row else None

    async def schedules_of(self, owner: str, *, include_ended: bool = False) -> list[Schedule]:
        """One person's schedules, oldest first: active and paused ones, and with `include_ended` the
        cancelled and done ones too."""
        live = "" if include_ended else f" AND status IN {_LIVE}"
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM schedules WHERE owner = ?{live} ORDER BY created_at, id", (owner,)
        )
        return [_schedule(row) for row in rows]

    async def all_schedules(self, *, include_ended: bool = False) -> list[Schedule]:
        """Everyone's schedules (the operator's list), oldest first; see `schedules_of`."""
        live = "" if include_ended else f" WHERE status IN {_LIVE}"
        rows = await self._rows(f"SELECT {_COLUMNS} FROM schedules{live} ORDER BY created_at, id")
        return [_schedule(row) for row in rows]

    async def active_schedules(self) -> list[Schedule]:
        """The schedules whose slots run (not paused, cancelled or done): what the runner looks at."""
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM schedules WHERE status = 'active' ORDER BY created_at, id"
        )
        return [_schedule(row) for row in rows]

    async def count_active_schedules(self, owner: str) -> int:
        """How many of a person's schedules are still in effect, active or paused: what the limit of
        schedules per person counts (a paused schedule can be resumed, so it keeps its place)."""
        row = await self._first(
            f"SELECT COUNT(*) FROM schedules WHERE owner = ? AND status IN {_LIVE}", (owner,)
        )
        return int(row[0]) if row else 0

    async def set_schedule_status(
        self, schedule_id: str, status: ScheduleStatus, *, by: str, at: float | None = None
    ) -> bool:
        """Pause, resume, cancel or end a schedule; `by` (a person's id, or "nerve") is kept with it.
        False if there is no such schedule or it ended already: cancelled and done are final."""
        changed = await self._change(
            "UPDATE schedules SET status = ?, changed_by = ?, changed_at = ?"
            f" WHERE id = ? AND status IN {_LIVE}",
            (status, by, time.time() if at is None else at, schedule_id),
        )
        return changed > 0

    async def claim_slot(self, schedule_id: str, slot: float, *, at: float, late_by: float) -> bool:
        """Claim one slot to run it: True for the one caller whose insert made its row ("running"),
        False when the schedule is not active (paused, cancelled, done, unknown) or the slot was
        claimed or recorded missed before, by anyone. One statement, so nothing comes in between."""
        claimed = await self._change(
            f"INSERT INTO schedule_runs ({_RUN_COLUMNS})"
            " SELECT id, ?, 'running', ?, NULL, ?, NULL, NULL, 0 FROM schedules"
            " WHERE id = ? AND status = 'active'"
            " ON CONFLICT DO NOTHING",
            (slot, at, late_by, schedule_id),
        )
        return claimed > 0

    async def finish_run(
        self, schedule_id: str, slot: float, status: RunStatus, *, at: float, note: str | None = None
    ) -> bool:
        """How a claimed run ended ("answered" or "failed"), kept as the schedule's last outcome; a once
        schedule is done with it. False (and nothing changed) unless that slot was running."""
        async with self._write() as db:
            finished = await db.execute(
                "UPDATE schedule_runs SET status = ?, finished_at = ?, note = ?"
                " WHERE schedule_id = ? AND slot = ? AND status = 'running'",
                (status, at, note, schedule_id, slot),
            )
            if finished.rowcount <= 0:
                return False
            await self._settled(db, schedule_id, slot, status, at)
        return True

    async def record_missed(self, schedule_id: str, slot: float, *, at: float) -> bool:
        """Record a slot that passed beyond the grace unrun, so that it never runs: True if this call
        recorded it, False if the slot was claimed or recorded before (or the schedule is unknown)."""
        async with self._write() as db:
            recorded = await db.execute(
                f"INSERT INTO schedule_runs ({_RUN_COLUMNS})"
                " SELECT id, ?, 'missed', ?, ?, ?, NULL, NULL, 0 FROM schedules WHERE id = ?"
                " ON CONFLICT DO NOTHING",
                (slot, at, at, max(at - slot, 0.0), schedule_id),
            )
            if recorded.rowcount <= 0:
                return False
            await self._settled(db, schedule_id, slot, "missed", at)
        return True

    async def _settled(self, db: Any, schedule_id: str, slot: float, outcome: str, at: float) -> None:
        """A slot's outcome on its schedule: its last one if no newer slot settled first; a once
        schedule, whose only slot this was, done (unless a person cancelled it meanwhile)."""
        await db.execute(
            "UPDATE schedules SET last_slot = ?, last_outcome = ?"
            " WHERE id = ? AND (last_slot IS NULL OR last_slot <= ?)",
            (slot, outcome, schedule_id, slot),
        )
        await db.execute(
            "UPDATE schedules SET status = 'done', changed_by = ?, changed_at = ?"
            f" WHERE id = ? AND rule = '' AND status IN {_LIVE}",
            (ENDED_BY_NERVE, at, schedule_id),
        )

    async def runs_of(self, schedule_id: str, limit: int = 20) -> list[ScheduleRun]:
        """A schedule's runs and missed slots, newest slot first."""
        rows = await self._rows(
            f"SELECT {_RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = ? ORDER BY slot DESC LIMIT ?",
            (schedule_id, limit),
        )
        return [_run(row) for row in rows]

    async def latest_slot(self, schedule_id: str) -> float | None:
        """The newest slot claimed or recorded missed (None before the first): the runner's `due`
        looks only after it."""
        row = await self._first("SELECT MAX(slot) FROM schedule_runs WHERE schedule_id = ?", (schedule_id,))
        return None if row is None or row[0] is None else float(row[0])

    async def running_runs(self, older_than: float) -> list[ScheduleRun]:
        """Runs claimed before `older_than` that never finished (their process may have died): for a
        runner to hand on or settle. Oldest first."""
        rows = await self._rows(
            f"SELECT {_RUN_COLUMNS} FROM schedule_runs WHERE status = 'running' AND started_at < ?"
            " ORDER BY started_at, schedule_id",
            (older_than,),
        )
        return [_run(row) for row in rows]

    async def run(self, schedule_id: str, slot: float) -> ScheduleRun | None:
        """One slot's run (or missed record), None when the slot was never claimed."""
        row = await self._first(
            f"SELECT {_RUN_COLUMNS} FROM schedule_runs WHERE schedule_id = ? AND slot = ?",
            (schedule_id, slot),
        )
        return None if row is None else _run(row)

    async def count_hand_on(self, schedule_id: str, slot: float) -> None:
        """One more time the running run was taken over after its process stopped."""
        await self._change(
            "UPDATE schedule_runs SET hand_ons = hand_ons + 1"
            " WHERE schedule_id = ? AND slot = ? AND status = 'running'",
            (schedule_id, slot),
        )

    async def set_run_message(self, schedule_id: str, slot: float, message: str) -> bool:
        """Keep the platform message a running run posted, once: False (nothing changed) when the run
        is not running or has one already, so a run handed on answers under the first post."""
        changed = await self._change(
            "UPDATE schedule_runs SET message = ?"
            " WHERE schedule_id = ? AND slot = ? AND status = 'running' AND message IS NULL",
            (message, schedule_id, slot),
        )
        return changed > 0
