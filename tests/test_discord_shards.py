"""Discord sharding: NERVE_DISCORD_SHARD_COUNT and NERVE_DISCORD_SHARDS read and checked as settings,
and the real discord.py client identifying exactly the configured shards to the fake gateway."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters.cli import main
from adapters.discord.app import gateway_up
from adapters.settings import Settings
from bot.agent import Agent
from bot.model.client import OpenAILLM
from bot.store.sqlite import SQLiteStore
from tests.fakes.discord_api import FakeDiscord, running_bot
from tests.fakes.llm_server import FakeLLMServer, reply

# --- the settings ---------------------------------------------------------------------------------


def settings_from(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    """Settings read from these environment variables only (as `nerve discord` reads them)."""
    for name in ("NERVE_DISCORD_SHARD_COUNT", "NERVE_DISCORD_SHARDS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def setting_error(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    with pytest.raises(ValueError) as caught:
        settings_from(monkeypatch, **env)
    return str(caught.value)


def test_unset_there_is_no_sharding(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from(monkeypatch)
    assert settings.nerve_discord_shard_count is None
    assert settings.discord_shard_ids is None


@pytest.mark.parametrize(
    ("shards", "ids"),
    [("0-3", [0, 1, 2, 3]), ("0,2,5", [0, 2, 5]), (" 1 - 2 , 7 ", [1, 2, 7]), ("6", [6])],
)
def test_shard_ids_are_read_as_ranges_and_lists(
    monkeypatch: pytest.MonkeyPatch, shards: str, ids: list[int]
) -> None:
    settings = settings_from(monkeypatch, NERVE_DISCORD_SHARD_COUNT="8", NERVE_DISCORD_SHARDS=shards)
    assert settings.nerve_discord_shard_count == 8
    assert settings.discord_shard_ids == ids


def test_a_count_alone_runs_every_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from(monkeypatch, NERVE_DISCORD_SHARD_COUNT="3")
    assert settings.discord_shard_ids == [0, 1, 2]


def test_shards_without_a_count_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    message = setting_error(monkeypatch, NERVE_DISCORD_SHARDS="0-1")
    assert "NERVE_DISCORD_SHARD_COUNT" in message


def test_a_shard_id_at_or_past_the_count_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    message = setting_error(monkeypatch, NERVE_DISCORD_SHARD_COUNT="4", NERVE_DISCORD_SHARDS="0,2,5")
    assert "5" in message and "0 to 3" in message


@pytest.mark.parametrize(
    ("shards", "words"),
    [
        ("a-b", "'a-b'"),
        ("3-1", "'3-1'"),
        ("1,,2", "empty"),
        ("1,1", "twice"),
        ("0-2,2", "twice"),
        ("-1", "'-1'"),
    ],
)
def test_unreadable_shard_lists_are_refused_naming_the_part(
    monkeypatch: pytest.MonkeyPatch, shards: str, words: str
) -> None:
    message = setting_error(monkeypatch, NERVE_DISCORD_SHARD_COUNT="8", NERVE_DISCORD_SHARDS=shards)
    assert "NERVE_DISCORD_SHARDS" in message or "nerve_discord_shards" in message
    assert words in message


def test_a_count_below_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "nerve_discord_shard_count" in setting_error(monkeypatch, NERVE_DISCORD_SHARD_COUNT="0")


def test_nerve_discord_names_the_bad_shard_setting_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "unused-token")
    monkeypatch.delenv("NERVE_DISCORD_SHARD_COUNT", raising=False)
    monkeypatch.setenv("NERVE_DISCORD_SHARDS", "0-3")
    assert main(["discord"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nerve: bad setting: NERVE_DISCORD_SHARDS")
    assert "NERVE_DISCORD_SHARD_COUNT" in err
    assert len(err.strip().splitlines()) == 1


# --- the gateway, through discord.py ----------------------------------------------------------------


@contextlib.asynccontextmanager
async def agent_for(llm_server: FakeLLMServer, store: SQLiteStore) -> AsyncIterator[Agent]:
    llm = OpenAILLM(model="fake", base_url=llm_server.base_url, api_key=None, timeout=20, max_retries=0)
    try:
        yield Agent(llm=llm, host=_NoTools(), store=store, inbox=store)
    finally:
        await llm.aclose()


class _NoTools:
    def list_tools(self) -> list[Any]:
        return []

    def starting(self) -> list[str]:
        return []


def shards_identified(fake: FakeDiscord) -> list[list[int] | None]:
    return [payload.get("shard") for payload in fake.identify_payloads]


async def test_unsharded_the_bot_identifies_once_without_a_shard(store: SQLiteStore) -> None:
    async with (
        FakeDiscord() as fake,
        FakeLLMServer([]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent) as bot,
    ):
        await asyncio.wait_for(bot.wait_until_ready(), 10)
        assert shards_identified(fake) == [None]
        assert gateway_up(bot)


async def test_the_configured_shards_and_only_those_identify_with_the_count(store: SQLiteStore) -> None:
    async with (
        FakeDiscord() as fake,
        FakeLLMServer([]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent, nerve_discord_shard_count=4, nerve_discord_shards="1,3") as bot,
    ):
        # discord.py waits 5 s between two IDENTIFYs, as Discord asks; then each shard's READY.
        await asyncio.wait_for(bot.wait_until_ready(), 30)
        assert shards_identified(fake) == [[1, 4], [3, 4]]
        assert sorted(bot.shards) == [1, 3]
        assert gateway_up(bot)


async def test_a_sharded_bot_answers_a_dm_on_shard_zero(store: SQLiteStore) -> None:
    async with (
        FakeDiscord() as fake,
        FakeLLMServer([reply("hello from shard zero")]) as llm,
        agent_for(llm, store) as agent,
        running_bot(fake, agent, nerve_discord_shard_count=2) as bot,
    ):
        await asyncio.wait_for(bot.wait_until_ready(), 30)
        assert shards_identified(fake) == [[0, 2], [1, 2]]
        user = fake.user("ada")
        await fake.user_dms(user, "hi")
        (posted,) = await fake.wait_for("POST", rf"/channels/{fake.dm_channels[user.id]}/messages")
        assert posted.body()["content"] == "hello from shard zero"
