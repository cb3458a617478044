"""The conversation store, every ledger in one object; `SQLiteStore` and `PostgresStore` give it its
connections, dialect and turn lock, and must behave the same: the store tests run against both."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from bot.seams import SharedTurnLock
from bot.store.approvals import ApprovalLedger
from bot.store.conversations import InboxLedger
from bot.store.feedback import FeedbackLedger
from bot.store.files import FileLedger
from bot.store.inputs import InputLedger
from bot.store.installs import InstallLedger
from bot.store.memories import MemoryLedger
from bot.store.person_data import PersonLedger
from bot.store.person_settings import PersonSettingsLedger
from bot.store.posts import PostLedger
from bot.store.schedules import ScheduleLedger
from bot.store.stop_requests import StopLedger
from bot.store.usage import UsageLedger
from bot.types import ConversationKey


class ConversationStore(
    ApprovalLedger,  # and the conversations and sign-ins it writes into
    InboxLedger,
    PostLedger,
    FeedbackLedger,
    InputLedger,
    MemoryLedger,
    ScheduleLedger,
    PersonSettingsLedger,
    FileLedger,
    UsageLedger,
    InstallLedger,
    StopLedger,
    PersonLedger,  # and the conversation listing it builds on
):
    # Turns of one conversation, one at a time across every process on this database.
    turn_lock: SharedTurnLock

    async def _holder(self, key: ConversationKey) -> str | None:
        return await self.turn_lock.holder(key)

    async def close(self) -> None:
        """Close the connections; waits for a running write to finish. Closing twice is harmless."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
