"""A schedule: a prompt its person asked nerve to run later, once or on a recurrence, and its runs.

Every instant is UTC epoch seconds (a float), so the store, the timing and a fake clock in a test
compare the same numbers; the wall time a person reads is derived from `timezone` when shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.types.conversation import ConversationKey

# active: its slots run; paused: they pass by unrun (and are not recorded) until it is resumed;
# cancelled: stopped by a person, for good; done: a once schedule whose slot was run or missed.
ScheduleStatus = Literal["active", "paused", "cancelled", "done"]
# running: claimed, its turn under way; answered / failed: how the turn ended; missed: the slot
# passed beyond the grace while nothing ran, recorded so that it is never run later.
RunStatus = Literal["running", "answered", "failed", "missed"]

# What a person's pause, resume or cancel came to: done, no such schedule (or it ended, or is not
# in a state to change so), or not theirs to change.
ScheduleChange = Literal["changed", "gone", "not_yours"]

# The statuses a schedule never leaves.
ENDED: tuple[ScheduleStatus, ...] = ("cancelled", "done")


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    # Short enough to type (`cancel s3f9a2c1`).
    id: str
    # The person who made it, as sign-ins and memories key people (`Person.id`): a run is theirs.
    owner: str
    # Their platform's user id, which a run's turn is started as (`Incoming.user_id`).
    owner_user: str
    # The conversation it was made in: a run answers there (a DM in the DM, a channel in the channel).
    key: ConversationKey
    # The place as a person reads it ("#general", "your DM"), or "" where there is no better name.
    place: str
    # What the run asks the model, in the person's words.
    prompt: str
    # The first slot (the recurrence's DTSTART), UTC epoch seconds.
    first_at: float
    # RFC 5545 RRULE text ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"), or "" for a schedule that runs once.
    rule: str
    # The IANA zone the recurrence is expanded in ("Europe/Paris"): 09:00 stays 09:00 across DST.
    timezone: str
    status: ScheduleStatus
    created_at: float
    # The newest slot that was run or recorded missed, and how it went (a `RunStatus`).
    last_slot: float | None = None
    last_outcome: str | None = None
    # Who last paused, resumed, cancelled or ended it (a person's id, or "nerve"), and when. Slots
    # that passed while it was paused are neither run nor missed: a runner looks for due slots after
    # the later of `last_slot` and the resume (`changed_at` of an active schedule).
    changed_by: str | None = None
    changed_at: float | None = None

    @property
    def once(self) -> bool:
        return not self.rule

    @property
    def ended(self) -> bool:
        return self.status in ENDED


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleRun:
    """One slot of a schedule, claimed (or recorded missed) exactly once: (schedule_id, slot) is unique."""

    schedule_id: str
    # The instant the slot was due, UTC epoch seconds.
    slot: float
    status: RunStatus
    started_at: float
    # None while it runs.
    finished_at: float | None
    # How long after its slot it started (0 when on time): the "due at 09:00, run at 09:17" note.
    late_by: float
    note: str | None = None
    # The platform message the run posted to answer under (a channel run's announcement), once posted.
    message: str | None = None
    # How many times it was taken over after the process running it stopped.
    hand_ons: int = 0
