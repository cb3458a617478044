"""Test schemas a killed run left behind are dropped at the next session start, and no schema a
running process may still use ever is: the real test PostgreSQL, processes and connections standing
in for the test workers of this and other runs."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.conftest import ROOT
from tests.pg_schemas import STALE_AFTER, drop_stale_schemas, owner_key, schema_name
from tests.stores import TEST_DATABASE_URL, postgres_backend, server_url

HOURS_AGO = time.time() - 2 * STALE_AFTER


def connect(url: str) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.fail(f"{TEST_DATABASE_URL}={url} cannot be reached: {exc}", pytrace=False)


@pytest.fixture
def url() -> str:
    return server_url()


@pytest.fixture
def made(url: str) -> Iterator[list[str]]:
    """Schemas a test makes by hand; dropped after it whatever it did."""
    names: list[str] = []
    yield names
    with connect(url) as conn:
        for name in names:
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def make(url: str, made: list[str], name: str) -> str:
    with connect(url) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
        conn.execute(f'CREATE TABLE "{name}".kept (x int)')
    made.append(name)
    return name


def exists(url: str, name: str) -> bool:
    with connect(url) as conn:
        return conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (name,)).fetchone() is not None


def dead_owner() -> str:
    """An owner token whose process is gone: nobody holds its lock."""
    return secrets.token_hex(4)


def test_an_old_schema_of_a_process_that_is_gone_is_dropped(url: str, made: list[str]) -> None:
    name = make(url, made, schema_name(HOURS_AGO, owner=dead_owner()))
    drop_stale_schemas(url)
    assert not exists(url, name)


def test_a_young_schema_of_a_process_that_is_gone_is_kept(url: str, made: list[str]) -> None:
    name = make(url, made, schema_name(time.time() - STALE_AFTER / 2, owner=dead_owner()))
    assert name not in drop_stale_schemas(url)
    assert exists(url, name)


def test_an_old_schema_of_a_process_still_running_is_kept(url: str, made: list[str]) -> None:
    owner = dead_owner()
    name = make(url, made, schema_name(HOURS_AGO, owner=owner))
    # A worker of another run that has been going for hours: it holds its owner lock.
    with connect(url) as worker:
        worker.execute("SELECT pg_advisory_lock(%s, %s)", owner_key(owner))
        assert name not in drop_stale_schemas(url)
        assert exists(url, name)
    # Once it has exited, the schema goes.
    drop_stale_schemas(url)
    assert not exists(url, name)


async def test_this_process_own_schemas_are_kept_even_when_old(url: str) -> None:
    async with postgres_backend() as backend:
        # As if this session had been running for hours.
        assert backend.schema not in drop_stale_schemas(url, now=lambda: time.time() + 2 * STALE_AFTER)
        assert exists(url, backend.schema)


def test_schemas_named_otherwise_are_never_touched(url: str, made: list[str]) -> None:
    others = [
        make(url, made, f"nerve_test_main_{secrets.token_hex(6)}"),  # the older naming
        make(url, made, f"someone_else_{secrets.token_hex(4)}"),
    ]
    drop_stale_schemas(url, now=lambda: time.time() + 100 * STALE_AFTER)
    assert all(exists(url, name) for name in others)


async def test_cleaners_running_at_once_drop_each_stale_schema_once_without_failing(
    url: str, made: list[str]
) -> None:
    owners = [dead_owner() for _ in range(3)]
    names = [make(url, made, schema_name(HOURS_AGO, owner=owners[i % 3])) for i in range(9)]
    results = await asyncio.gather(*(asyncio.to_thread(drop_stale_schemas, url) for _ in range(4)))
    dropped = [name for result in results for name in result if name in names]
    assert len(dropped) == len(set(dropped)), "a schema dropped twice"
    assert not any(exists(url, name) for name in names)


def test_a_session_start_drops_what_a_killed_run_left_behind(url: str, made: list[str]) -> None:
    left = make(url, made, schema_name(HOURS_AGO, owner=dead_owner()))
    kept = make(url, made, schema_name(owner=dead_owner()))
    env = {**os.environ, TEST_DATABASE_URL: url}
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "--collect-only",
            "-p",
            "no:cacheprovider",
            "tests/test_stale_schemas.py",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert not exists(url, left)
    assert exists(url, kept)
