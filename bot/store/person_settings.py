"""A person's own settings, one row each: for now the time zone their schedules are read and shown in.

No row (or no zone) means the platform's default, which the caller knows (`Agent.time_zone_of`).
"""

from __future__ import annotations

import time

from bot.store.dialect import Ledger


class PersonSettingsLedger(Ledger):
    async def time_zone(self, person: str) -> str | None:
        """The IANA zone `person` chose, or None when they never chose one."""
        row = await self._first("SELECT time_zone FROM person_settings WHERE person = ?", (person,))
        return str(row[0]) if row and row[0] else None

    async def set_time_zone(self, person: str, zone: str | None, *, at: float | None = None) -> None:
        """Store `person`'s zone (already checked by the caller); None goes back to the default."""
        await self._change(
            "INSERT INTO person_settings (person, time_zone, changed_at) VALUES (?, ?, ?)"
            " ON CONFLICT (person) DO UPDATE SET time_zone = excluded.time_zone,"
            " changed_at = excluded.changed_at",
            (person, zone, time.time() if at is None else at),
        )
