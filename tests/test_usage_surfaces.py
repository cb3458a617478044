"""`/usage` on every surface through its fake: Slack's `/nerve usage` and Discord's `/usage` answer
the person alone (ephemeral) with their use today and this month against their limits; an admin's
adds the place's and the workspace's; the terminal's `/usage` prints the same lines."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from adapters.common.usage_words import usage_lines
from adapters.discord.render import escape_text
from adapters.settings import PLATFORMS
from bot.agent import AgentConfig
from bot.budgets.rules import parse_budgets
from bot.store.base import ConversationStore
from bot.store.usage import Reservation, UsageEntry
from bot.types import Usage
from tests.fakes.discord_api import FakeDiscord, running_bot
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.fakes.slack_api import TEAM_ID
from tests.stores import Backend
from tests.test_discord_memory import agent_on, answered, fake
from tests.test_slack_approvals import ADMIN, ALICE, CHANNEL, command
from tests.test_slack_harness import rig
from tests.test_slack_memory import FORM
from tests.test_terminal import PROMPT, nerve, terminal
from tests.test_terminal_approvals import env_for

pytestmark = pytest.mark.both_stores
__all__ = ["fake"]

BUDGETS = '{"person": {"day": {"tokens": 100000}}, "place": {"month": {"tokens": 5000000}}}'


async def spent(store: ConversationStore, person: str, place: str, workspace: str, tokens: int) -> None:
    entry = UsageEntry(
        turn=None, conversation="c", person=person, place=place, workspace=workspace, platform="x", model="m"
    )
    reserved = await store.reserve_usage(entry, Usage(), None, [], at=time.time())
    assert isinstance(reserved, Reservation)
    await store.settle_usage(reserved.id, "m", Usage(prompt_tokens=tokens - 2, completion_tokens=2), None)


async def test_slack_nerve_usage_tells_the_person_alone_and_an_admin_the_place_and_workspace_too(
    tmp_path: Path, store_backend: Backend
) -> None:
    config = AgentConfig(platforms=PLATFORMS, admins=frozenset({ADMIN}), budgets=parse_budgets(BUDGETS))
    async with rig(tmp_path, [], backend=store_backend, config=config, nerve_admins=ADMIN) as r:
        await spent(r.store, f"slack:{TEAM_ID}:{ALICE}", f"slack:{CHANNEL}", f"slack:{TEAM_ID}", 1234)
        status, body = await r.deliver_raw(command("usage", ALICE), FORM)
        assert status == 200
        shown = json.loads(body)
        assert shown["response_type"] == "ephemeral"
        lines = shown["text"].splitlines()
        assert lines[0].startswith("You, today: 1,234 tokens of 100,000 (resets 00:00 UTC on ")
        assert lines[1] == "You, this month: 1,234 tokens"
        assert len(lines) == 2  # not an admin: only their own

        status, body = await r.deliver_raw(command("usage", ADMIN), FORM)
        admins = json.loads(body)["text"].splitlines()
        assert admins[0].startswith("You, today: 0 tokens of 100,000 (resets 00:00 UTC on ")
        assert admins[-1] == "As an admin you are not held to the limits."
        assert "This place, this month: 1,234 tokens of 5,000,000 (resets 00:00 UTC on " in admins[3]
        assert admins[5] == "This workspace, this month: 1,234 tokens"


async def test_discord_usage_answers_only_the_person_who_asked(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada = fake.user("ada")
    await spent(store, f"discord:{ada.id}", "discord:-", "discord:dm", 77)
    async with FakeLLMServer([]) as model, agent_on(store, model) as agent, running_bot(fake, agent):
        interaction = await fake.slash(ada, "usage", {}, channel_id=fake.channel_id)
        shown = str((await answered(fake, interaction))["content"])  # answered() checks it is ephemeral
    assert shown == escape_text("\n".join(["You, today: 77 tokens", "You, this month: 77 tokens"]))


async def test_the_terminal_prints_usage_after_a_turn_with_the_limits_in_force(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("")
    figures = Usage(prompt_tokens=300, completion_tokens=20)
    async with FakeLLMServer([reply("It is fine.", usage=figures)]) as model:
        env = env_for(tmp_path, notes, model, NERVE_DB=str(tmp_path / "nerve.db"), NERVE_BUDGETS=BUDGETS)
        async with terminal(*nerve("chat"), env=env) as term:
            at = await term.expect(PROMPT)
            term.type(b"how is the air?\r")
            at = await term.expect(b"It is fine.", after=at)
            at = await term.expect(PROMPT, after=at)
            term.type(b"/usage\r")
            at = await term.expect(b"You, today: 320 tokens of 100,000 (resets 00:00 UTC on", after=at)
            at = await term.expect(b"You, this month: 320 tokens", after=at)
            await term.expect(PROMPT, after=at)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0


def test_no_store_means_usage_is_said_not_to_be_recorded() -> None:
    assert usage_lines(None) == ["Usage is not recorded here: there is no conversation store."]
