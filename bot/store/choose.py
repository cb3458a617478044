"""Which database the conversation store is on: PostgreSQL when NERVE_DATABASE_URL is set, else the
SQLite file NERVE_DB (the embedded default, needing nothing else)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bot.config import Settings
from bot.errors import ConfigError
from bot.store.base import ConversationStore
from bot.store.sqlite import SQLiteStore

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


async def open_configured_store(settings: Settings) -> ConversationStore:
    if settings.nerve_database_url is None:
        return await SQLiteStore.open(settings.nerve_db, turn_lease_seconds=settings.nerve_turn_lease)
    return await open_postgres_store(settings.nerve_database_url.get_secret_value())


async def open_postgres_store(url: str) -> ConversationStore:
    """The PostgreSQL store at `url`; psycopg is imported only here, so SQLite needs no extra."""
    check_postgres_url(url, "; leave it unset to keep the conversations in the SQLite file NERVE_DB")
    with postgres_support():
        from bot.store.postgres import PostgresStore
    return await PostgresStore.open(url)


def check_postgres_url(url: str, advice: str) -> None:
    if not url.startswith(POSTGRES_SCHEMES):
        raise ConfigError(
            f"NERVE_DATABASE_URL must be a PostgreSQL URL (postgresql://user:password@host:5432/database){advice}"
        )


@contextmanager
def postgres_support() -> Iterator[None]:
    """Around the import of what PostgreSQL needs: its absence is a setting to fix, not a crash."""
    try:
        yield
    except ImportError as exc:
        raise ConfigError(
            f"NERVE_DATABASE_URL is set but PostgreSQL support is not installed ({exc.name} is missing):"
            " pip install 'nerve[postgres]'"
        ) from exc
