"""Schedules on Discord: a reminder asked of the model waits on its card for its person alone to confirm,
is then stored and runs once when due, and cancelled on its card stores nothing; the bot runs each due
slot once, as its person — a DM's in the DM, a channel's under one new message that calls that person,
answered in a thread on it, with the tool results as usual and how to stop it; a run handed on (started
again for its slot) answers under the message it kept, never a second one; `/schedules` lists a person's
own and cancels one; `/timezone` sets their zone and refuses one that does not exist.

Real discord.py against the fake Discord (gateway and REST), the real Agent on a real store (SQLite
and PostgreSQL), and the real `openai` client against the fake model service.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.common import refs
from adapters.discord.incoming import dm_key, thread_key
from adapters.discord.render import escape_text
from adapters.settings import PLATFORMS
from bot.agent import Agent
from bot.asks.parking import NOT_YOURS_TO_SCHEDULE
from bot.mcp.host import MCPHost
from bot.schedules import timing
from bot.store.base import ConversationStore
from bot.store.schedules import new_schedule_id
from bot.types import ConversationKey, Person, Schedule, ToolResult
from tests.fakes.clock import Clock
from tests.fakes.discord_api import FakeDiscord, FakeUser, NerveDiscordBot, running_bot
from tests.fakes.llm_server import FakeLLMServer, Step, own_text, reply, tool_reply
from tests.test_discord_approvals import approval_in, buttons, click, ephemeral_note, host, note, notes
from tests.test_discord_bot import button_ids
from tests.test_discord_memory import agent_on, answered, fake
from tests.test_slack_harness import StaticHost
from tests.test_terminal_approvals import append

pytestmark = pytest.mark.both_stores
__all__ = ["fake", "host", "notes"]

MINUTE, DAY = 60.0, 86_400.0
PARIS = "Europe/Paris"
POSTED = r"/channels/{}/messages"


def a_schedule(
    key: ConversationKey, user: FakeUser, prompt: str, first_at: float, rule: str = ""
) -> Schedule:
    return Schedule(
        id=new_schedule_id(),
        owner=person(user).id,
        owner_user=str(user.id),
        key=key,
        place="",
        prompt=prompt,
        first_at=first_at,
        rule=rule,
        timezone=PARIS,
        status="active",
        created_at=first_at - DAY,
    )


def person(user: FakeUser) -> Person:
    key = ConversationKey(platform="discord", workspace="dm", channel="0", thread=str(user.id))
    return Person.of(key, str(user.id), PLATFORMS)


def air_host() -> StaticHost:
    return StaticHost({"air_quality": lambda _a: ToolResult(content="A1001: AQI 21")})


def posts_in(fake: FakeDiscord, channel_id: int) -> list[dict[str, Any]]:
    """What the bot posted in a channel, as Discord received it."""
    return [r.body() for r in fake.find("POST", POSTED.format(channel_id))]


def has(fake: FakeDiscord, channel_id: int, text: str) -> bool:
    return any(text in (m["content"] or "") for m in fake.bot_messages(channel_id))


@dataclass
class Rig:
    model: FakeLLMServer
    agent: Agent
    bot: NerveDiscordBot


@contextlib.asynccontextmanager
async def running(
    fake: FakeDiscord, store: ConversationStore, script: list[Step], host: Any = None
) -> AsyncIterator[Rig]:
    """The real bot on the fake Discord, its Agent on `store`, the model answering `script`."""
    async with (
        FakeLLMServer(script) as model,
        agent_on(store, model, host) as agent,
        running_bot(fake, agent) as bot,
    ):
        yield Rig(model, agent, bot)


async def ran(bot: NerveDiscordBot) -> None:
    """Until the runs the bot's runner started have ended (their outcome written)."""
    assert bot.schedules.runner is not None
    await bot.schedules.runner.wait_for_runs()


async def test_a_dm_reminder_is_answered_in_the_dm_once_with_its_tool_results_and_how_to_stop_it(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada = fake.user("ada")
    dm = fake.dm_channel(ada)
    due = a_schedule(dm_key(dm, ada.id), ada, "check the air in A1001", time.time() - 30)
    await store.add_schedule(due)
    script = [tool_reply(("air_quality", "{}")), reply("The air in A1001 is fine: AQI 21.")]
    async with running(fake, store, script, air_host()) as rig:
        model, bot = rig.model, rig.bot
        await fake.wait_until(lambda: has(fake, dm, "AQI 21."), within=20)
        await ran(bot)

        [answer] = fake.bot_messages(dm)
        assert f"Scheduled run ({due.id}) — stop it with /schedules cancel {due.id}" in answer["content"]
        assert "air_quality" in answer["content"]  # the tool line, and its results behind the button
        assert [i for i in button_ids(answer) if i.startswith("nerve:tools:")], "its tool results button"
        assert fake.find("POST", r"/channels/\d+/messages/\d+/threads") == []
        assert len(model.requests) == 2
        offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
        assert "list_schedules" in offered, "the schedule tools are offered on Discord"
        user = model.requests[0]["messages"][-1]
        assert own_text(user["content"]) == "check the air in A1001"

    assert [(r.status, r.note) for r in await store.runs_of(due.id)] == [("answered", None)]
    assert (await store.schedule(due.id)).status == "done"  # type: ignore[union-attr]


def started_threads(fake: FakeDiscord) -> list[str]:
    return [r.path for r in fake.find("POST", r"/channels/\d+/messages/\d+/threads")]


def schedule_call(prompt: str, at: float) -> Step:
    """The model's `schedule` call: `prompt` once at `at`, as a wall time of the person's own zone (UTC)."""
    wall = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M")
    return tool_reply(("schedule", json.dumps({"prompt": prompt, "at": wall, "repeat": "", "timezone": ""})))


async def test_a_reminder_asked_in_a_channel_is_confirmed_on_its_card_by_its_person_only_then_runs_once(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada, bob = fake.user("ada"), fake.user("bob")
    at = (int(time.time()) // 60 + 5) * 60.0  # in 4 to 5 minutes, on the minute
    script = [
        schedule_call("remind me to stretch", at),
        reply("I'll remind you to stretch."),
        reply("Time to stretch!"),
    ]
    async with running(fake, store, script) as rig:
        model, bot = rig.model, rig.bot
        mention = await fake.user_says(ada, "remind me in 5 minutes to stretch", mention_bot=True)
        card = await approval_in(fake, fake.channel_id)

        content = card["content"]
        assert content.startswith("⏰ **Schedule this?**")
        assert f"Only <@{ada.id}> can decide." in content and "admin" not in content, (
            "the card names who may confirm it: its person, never an admin"
        )
        [embed] = card["embeds"]
        assert embed["title"] == "Schedule this?"
        said = embed["description"]
        assert "Prompt: remind me to stretch" in said
        assert f"Where: channel {fake.channel_id} (Discord)" in said
        assert f"Runs once: {timing.local_text(at, 'UTC')}" in said and "Time zone: UTC" in said
        assert set(buttons(card)) == {"Confirm", "Cancel"}, "asked every time: no button to always allow it"
        assert await store.schedules_of(person(ada).id) == [], "nothing is scheduled unconfirmed"

        refused = await click(fake, bob, card, "Confirm")
        assert await ephemeral_note(fake, refused) == NOT_YOURS_TO_SCHEDULE
        assert await store.schedules_of(person(ada).id) == [] and len(model.requests) == 1

        await click(fake, ada, card, "Confirm")
        thread = int(mention["id"])  # the conversation's thread, started on the mention
        await fake.wait_until(lambda: has(fake, thread, "I'll remind you to stretch."), within=20)

        [made] = await store.schedules_of(person(ada).id)
        assert (made.status, made.prompt, made.first_at, made.rule, made.timezone) == (
            "active",
            "remind me to stretch",
            at,
            "",
            "UTC",
        )
        assert made.key == thread_key(fake.guild_id, fake.channel_id, thread) and made.owner_user == str(
            ada.id
        )
        assert made.id in str(model.requests[1]["messages"][-1]["content"]), "the model reads what was made"

        # The bot's own runner looks on the wall clock: this one's clock is past the reminder's time.
        runner = rig.agent.schedule_runner(bot.schedules.start, mine=bot.schedules.mine, clock=Clock(at + 30))
        await runner.tick()
        await runner.wait_for_runs()
        await runner.tick()
        await runner.wait_for_runs()

        [announced] = [
            m for m in fake.bot_messages(fake.channel_id) if m["content"].startswith("⏰ Scheduled")
        ]
        assert announced["content"] == f"⏰ Scheduled for <@{ada.id}>: remind me to stretch"
        [answer] = [m for m in fake.bot_messages(int(announced["id"])) if "Time to stretch!" in m["content"]]
        assert f"stop it with /schedules cancel {made.id}" in answer["content"]
        assert len(model.requests) == 3
        assert own_text(model.requests[2]["messages"][-1]["content"]) == "remind me to stretch"
    assert [r.status for r in await store.runs_of(made.id)] == ["answered"]


async def test_a_reminder_cancelled_on_its_card_stores_nothing_and_the_turn_answers(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada = fake.user("ada")
    at = (int(time.time()) // 60 + 5) * 60.0
    script = [schedule_call("remind me to stretch", at), reply("Not scheduled, then.")]
    async with running(fake, store, script) as rig:
        await fake.user_dms(ada, "remind me in 5 minutes to stretch")
        dm = fake.dm_channel(ada)
        card = await approval_in(fake, dm)
        assert "Where: your DM with nerve (Discord)" in card["embeds"][0]["description"]

        await click(fake, ada, card, "Cancel")
        await fake.wait_until(lambda: has(fake, dm, "Not scheduled, then."), within=20)

        assert await store.schedules_of(person(ada).id) == []
        assert "denied" in str(rig.model.requests[1]["messages"][-1]["content"])


async def test_a_channel_schedule_posts_one_message_calling_its_person_and_answers_in_its_thread(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada = fake.user("ada")
    made_in = thread_key(fake.guild_id, fake.channel_id, fake.snowflake())
    due = a_schedule(made_in, ada, "post the *AQI* for A1001 @everyone", time.time() - 30)
    await store.add_schedule(due)
    script = [tool_reply(("air_quality", "{}")), reply("AQI in A1001: 21.")]
    async with running(fake, store, script, air_host()) as rig:
        model, bot = rig.model, rig.bot
        await fake.wait_until(
            lambda: any(has(fake, int(t), "AQI in A1001: 21.") for t in fake.channels), within=20
        )
        await ran(bot)

        [posted] = posts_in(fake, fake.channel_id)
        assert posted["content"] == (f"⏰ Scheduled for <@{ada.id}>: post the \\*AQI\\* for A1001 @everyone")
        assert posted["allowed_mentions"] == {"parse": [], "users": [ada.id]}, "it calls its person only"
        [announced] = fake.bot_messages(fake.channel_id)
        assert started_threads(fake) == [f"/channels/{fake.channel_id}/messages/{announced['id']}/threads"]
        thread = int(announced["id"])  # a thread started on a message has its id
        [answer] = fake.bot_messages(thread)
        assert answer["content"].startswith("AQI in A1001: 21.")
        assert f"stop it with /schedules cancel {due.id}" in answer["content"]
        assert [i for i in button_ids(answer) if i.startswith("nerve:tools:")]
        assert answer["allowed_mentions"] == {"parse": []}, "the answer pings no one"
        assert len(model.requests) == 2

    [run] = await store.runs_of(due.id)
    assert (run.status, run.message) == ("answered", refs.message_ref(fake.channel_id, thread))
    # The conversation of the run is its thread, as if its person had asked there.
    history = await store.history(thread_key(fake.guild_id, fake.channel_id, thread))
    assert history[0].content == due.prompt


async def test_a_handed_on_run_answers_under_the_message_it_kept_and_never_posts_another(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada = fake.user("ada")
    slot = time.time() - 2 * MINUTE
    due = a_schedule(thread_key(fake.guild_id, fake.channel_id, fake.snowflake()), ada, "check the air", slot)
    await store.add_schedule(due)
    # A process claimed the slot, posted its message, kept it with the run, and stopped.
    assert await store.claim_slot(due.id, slot, at=slot + 1, late_by=1.0)
    kept = fake.bot_posted(fake.channel_id, f"⏰ Scheduled for <@{ada.id}>: check the air")
    assert await store.set_run_message(due.id, slot, refs.message_ref(fake.channel_id, kept["id"]))
    async with running(fake, store, [reply("The air is fine.")]) as rig:
        model, bot = rig.model, rig.bot
        thread = int(kept["id"])
        await fake.wait_until(lambda: has(fake, thread, "The air is fine."), within=20)
        await ran(bot)
        # Started once more for the same slot (a second hand-on): it goes on in the same messages.
        assert (await bot.schedules.start(due, slot, 1.0)).status == "answered"

        assert posts_in(fake, fake.channel_id) == [], "no second announcement"
        assert len(started_threads(fake)) <= 2  # the second start finds its thread there
        assert len(posts_in(fake, thread)) == 1, "the answer once"
        assert len(model.requests) == 1
    assert [r.status for r in await store.runs_of(due.id)] == ["answered"]


async def said(fake: FakeDiscord, user: FakeUser, command: str, **options: str) -> str:
    """What a command answered, only to the person who used it."""
    return str(
        (await answered(fake, await fake.slash(user, command, options, channel_id=fake.channel_id)))[
            "content"
        ]
    )


async def test_schedules_lists_a_persons_own_only_to_them_and_cancels_one_never_anothers(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada, bob = fake.user("ada"), fake.user("bob")
    here = thread_key(fake.guild_id, fake.channel_id, fake.snowflake())
    now = time.time()
    daily = a_schedule(here, ada, "post the AQI", now + DAY, "FREQ=DAILY")
    bobs = a_schedule(here, bob, "BOB-CANARY bob's reminder", now + DAY)
    for schedule in (daily, bobs):
        await store.add_schedule(schedule)
    async with running(fake, store, []):
        listed = await said(fake, ada, "schedules")
        upcoming = timing.next_slots(daily.first_at, daily.rule, daily.timezone, now, 1)[0]
        assert f"`{daily.id}` **active** post the AQI" in listed
        assert escape_text(f"next: {timing.local_text(upcoming, PARIS)}; last: not run yet") in listed
        assert "BOB-CANARY" not in listed

        assert await said(fake, ada, "schedules", action="cancel", schedule=bobs.id) == (
            f"{bobs.id} is not yours to change."
        )
        assert await said(fake, ada, "schedules", action="pause") == (
            "Name the schedule too: `/schedules action:pause schedule:ID` (`/schedules` lists their ids)."
        )
        assert (
            await said(fake, ada, "schedules", action="cancel", schedule=daily.id) == f"Cancelled {daily.id}."
        )
        assert (await said(fake, ada, "schedules")).startswith("You have no schedules.")
    assert (await store.schedule(daily.id)).status == "cancelled"  # type: ignore[union-attr]
    assert (await store.schedule(bobs.id)).status == "active"  # type: ignore[union-attr]


async def test_timezone_sets_shows_and_resets_a_persons_zone_and_refuses_one_that_does_not_exist(
    fake: FakeDiscord, store: ConversationStore
) -> None:
    ada = fake.user("ada")
    async with running(fake, store, []) as rig:
        agent = rig.agent
        assert (await said(fake, ada, "timezone")).startswith(escape_text("Your time zone is UTC (it is "))
        assert await said(fake, ada, "timezone", zone="Europe/Paris") == escape_text(
            "Your time zone is now Europe/Paris: your schedules' times are read and shown in it."
        )
        assert await agent.time_zone_of(person(ada)) == PARIS

        refused = await said(fake, ada, "timezone", zone="Mars/Olympus")
        assert refused == escape_text(
            "'Mars/Olympus' is not a time zone: give an IANA name such as Europe/Paris or America/New_York"
        )
        assert await agent.time_zone_of(person(ada)) == PARIS
        assert (await said(fake, ada, "timezone")).startswith(
            escape_text("Your time zone is Europe/Paris (it is ")
        )

        typed = await fake.autocomplete(ada, "timezone", "zone", "paris", channel_id=fake.channel_id)
        (offered,) = await fake.wait_for("POST", re.escape(f"/interactions/{typed['id']}/") + ".*")
        assert offered.body()["data"]["choices"] == [{"name": PARIS, "value": PARIS}]

        reset = await said(fake, ada, "timezone", zone="reset")
        assert reset == escape_text("Your time zone is back to the default: UTC.")
        assert await agent.time_zone_of(person(ada)) == "UTC"


async def test_a_scheduled_write_waits_in_its_thread_for_its_person_who_is_called_and_goes_on_once_approved(
    fake: FakeDiscord, store: ConversationStore, host: MCPHost, notes: Path
) -> None:
    ada = fake.user("ada")
    due = a_schedule(
        thread_key(fake.guild_id, fake.channel_id, fake.snowflake()),
        ada,
        "append the daily line to my notes",
        time.time() - 30,
    )
    await store.add_schedule(due)
    script = [tool_reply(append("daily line", "call_a")), reply("Appended the daily line.")]
    async with running(fake, store, script, host) as rig:
        bot = rig.bot
        await fake.wait_until(lambda: len(fake.bot_messages(fake.channel_id)) == 1, within=20)
        thread = int(fake.bot_messages(fake.channel_id)[0]["id"])
        card = await approval_in(fake, thread)
        await fake.wait_until(lambda: has(fake, thread, "waits for your decision"), within=20)
        await ran(bot)
        [call] = [m for m in posts_in(fake, thread) if "waits for your decision" in m["content"]]
        assert call["content"].startswith(f"<@{ada.id}> this scheduled run waits for your decision above.")
        assert call["allowed_mentions"] == {"parse": [], "users": [ada.id]}, "only its person is called"
        assert "daily line" not in note(notes), "nothing ran unapproved"
        assert [(r.status, r.note) for r in await store.runs_of(due.id)] == [
            ("answered", "waits for a decision")
        ]

        await click(fake, ada, card, "Approve")
        await fake.wait_until(lambda: has(fake, thread, "Appended the daily line."), within=20)
        assert "daily line" in note(notes)
        assert len(posts_in(fake, fake.channel_id)) == 1, "one announcement"


class Stopped(Exception):
    """The process stopped here."""


async def test_a_run_that_stopped_before_keeping_its_message_gets_it_back_and_posts_no_second(
    fake: FakeDiscord, store: ConversationStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ada = fake.user("ada")
    slot = float(int(time.time())) + DAY  # not due: the test starts the run itself
    due = a_schedule(
        thread_key(fake.guild_id, fake.channel_id, fake.snowflake()), ada, "did it deploy?", slot
    )
    await store.add_schedule(due)
    assert await store.claim_slot(due.id, slot, at=slot, late_by=0.0)
    async with running(fake, store, [reply("It deployed.")]) as rig:

        async def stopped(*_args: object) -> bool:
            raise Stopped

        monkeypatch.setattr(rig.agent, "keep_run_message", stopped)
        with pytest.raises(Stopped):
            await rig.bot.schedules.start(due, slot, 0.0)  # posted, then stopped before keeping it
        monkeypatch.undo()
        handed_on = await rig.bot.schedules.start(due, slot, 0.0)

        assert handed_on.status == "answered"
        assert len(posts_in(fake, fake.channel_id)) == 2, "asked twice, with the run's nonce both times"
        [announced] = fake.bot_messages(fake.channel_id)  # Discord kept one: it enforces the nonce
        assert has(fake, int(announced["id"]), "It deployed.")
        run = await rig.agent.schedule_run(due.id, slot)
        assert run is not None and run.message == refs.message_ref(fake.channel_id, announced["id"])
