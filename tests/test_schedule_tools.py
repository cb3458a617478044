"""The built-in schedule tools: a `schedule` call is checked, then always waits for its own person to
confirm it on a card showing the prompt, the place, the next three run times and the time zone;
people list and cancel only their own schedules; the offline model sets, lists and cancels reminders.

Real Agent, the real `openai` client against the local model service (or the offline model), a real
store on SQLite and PostgreSQL, and a fake clock: every instant below is fixed.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from adapters.common import cards
from adapters.discord.approvals import approval_message as discord_approval
from adapters.discord.approvals import approval_view as discord_view
from adapters.settings import PLATFORMS
from adapters.slack.approval_view import approval_message as slack_approval
from adapters.terminal.approve import ask_each
from bot.agent import Agent, AgentConfig
from bot.asks.parking import NOT_YOURS_TO_SCHEDULE
from bot.errors import ConfigError, ScheduleError
from bot.mcp.host import MCPHost
from bot.mcp.servers_file import load_mcp_config
from bot.model.client import OpenAILLM
from bot.model.offline import OfflineModel
from bot.policy.scopes import Place
from bot.schedules import timing
from bot.schedules.tools import RUNS_ON
from bot.schedules.zones import local_time_zone
from bot.store.base import ConversationStore
from bot.store.sqlite import SQLiteStore
from bot.text.turn_note import split_note
from bot.types import ApprovalPrompt, Approve, CallContext, ConversationKey, Deny, Incoming, Schedule
from tests.fakes.clock import Clock
from tests.fakes.llm_server import FakeCall, FakeLLMServer, reply, told, tool_reply
from tests.fakes.scripted import Call, ScriptedLLM, Step
from tests.test_cli import nerve_env, run_nerve

pytestmark = pytest.mark.both_stores

ALICE, BOB, ADMIN = "U1ALICE", "U2BOB", "U9ADMIN"
# Mon 7 Dec 2026, 08:00 UTC (09:00 in Paris).
NOW = datetime(2026, 12, 7, 8, 0, tzinfo=UTC).timestamp()


def dm(user: str, text: str = "") -> Incoming:
    return Incoming(
        key=ConversationKey(platform="slack", workspace="T1", channel=f"D{user}", thread="1.1"),
        text=text,
        user_id=user,
        place=Place(platform="slack", channel=f"D{user}", dm=True, user=user),
    )


def channel(user: str, text: str = "", name: str = "CGENERAL") -> Incoming:
    return Incoming(
        key=ConversationKey(platform="slack", workspace="T1", channel=name, thread="5.5"),
        text=text,
        user_id=user,
        place=Place(platform="slack", channel=name, user=user),
    )


def terminal(text: str) -> Incoming:
    key = ConversationKey(platform="terminal", workspace="local", channel="local", thread="main")
    return Incoming(key=key, text=text, user_id="me")


@pytest.fixture(scope="module")
async def no_servers() -> Any:
    async with MCPHost({}, default_timeout=5.0) as host:
        yield host


def agent_of(llm: Any, host: MCPHost, store: ConversationStore, clock: Clock, **config: Any) -> Agent:
    return Agent(
        llm=llm,
        host=host,
        store=store,
        inbox=store,
        approvals=store,
        memories=store,
        schedules=store,
        clock=clock,
        config=AgentConfig(
            admins=frozenset({ADMIN}),
            platforms=PLATFORMS,
            # Cards on every surface are checked here; where schedules run is checked on its own.
            schedules_run_on=frozenset({"slack", "discord", "terminal"}),
            **config,
        ),
    )


def openai(server: FakeLLMServer) -> OpenAILLM:
    return OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=5.0, max_retries=0)


def schedule_call(at: str, repeat: str = "", timezone: str = "", prompt: str = "post the AQI") -> FakeCall:
    arguments = {"prompt": prompt, "at": at, "repeat": repeat, "timezone": timezone}
    return FakeCall(name="schedule", arguments=json.dumps(arguments), id="s1")


def result(text: str) -> Any:
    """A tool's JSON result as the model reads it, after the host's certainty line (and before the
    turn's note, which ends the latest result)."""
    own = split_note(text)[0]
    return json.loads(own[own.index("{") :])


def owner(incoming: Incoming, bot: Agent) -> str:
    return bot.person(incoming.key, incoming.user_id).id


def tool_texts(server: FakeLLMServer) -> list[str]:
    return [str(m.get("content")) for m in server.last_messages() if m.get("role") == "tool"]


async def test_a_schedule_waits_for_its_person_on_a_card_and_runs_as_confirmed(no_servers, store):
    made = schedule_call("2026-12-08T09:00", "FREQ=DAILY")
    async with FakeLLMServer([tool_reply(made), reply("Done: every day at 09:00.")]) as model:
        bot = agent_of(openai(model), no_servers, store, Clock(NOW))
        await bot.set_time_zone(bot.person(dm(ALICE).key, ALICE), "Europe/Paris")

        parked = await bot.reply(dm(ALICE, "post the AQI every day at 9"))

        [ask] = parked.waiting
        assert ask.approval is not None
        [call] = ask.approval.calls
        assert call.summary is not None
        text = call.summary.text
        assert "Prompt: post the AQI" in text
        assert "Where: your DM with nerve (Slack)" in text
        assert "Next runs: Tue 8 Dec 09:00 CET; Wed 9 Dec 09:00 CET; Thu 10 Dec 09:00 CET" in text
        assert "Time zone: Europe/Paris" in text
        question = cards.remember_question(call)
        assert question is not None and (question.yes, question.no) == ("Confirm", "Cancel")
        shown_on_platforms(ask.approval)
        assert "The current time is 2026-12-07T09:00:00+01:00" in told(model.requests[0])
        assert await store.schedules_of(owner(dm(ALICE), bot)) == [], "nothing is scheduled unconfirmed"

        stranger = await bot.answer(ask.id, BOB, Approve())
        assert not stranger.changed and stranger.note == NOT_YOURS_TO_SCHEDULE, "never told an admin could"
        admin = await bot.answer(ask.id, ADMIN, Approve())
        assert not admin.changed and admin.note == NOT_YOURS_TO_SCHEDULE, "not even an admin confirms it"
        answered = await bot.answer(ask.id, ALICE, Approve())
        final = await bot.resume(answered.resume[0])

    assert final is not None and final.text == "Done: every day at 09:00."
    [stored] = await store.schedules_of(owner(dm(ALICE), bot))
    assert stored.status == "active" and stored.rule == "FREQ=DAILY" and stored.timezone == "Europe/Paris"
    assert stored.first_at == datetime(2026, 12, 8, 8, 0, tzinfo=UTC).timestamp()
    assert stored.prompt == "post the AQI" and stored.key == dm(ALICE).key


async def test_a_declined_schedule_stores_nothing(no_servers, store):
    async with FakeLLMServer(
        [tool_reply(schedule_call("2026-12-07T10:00Z")), reply("Not scheduled.")]
    ) as model:
        bot = agent_of(openai(model), no_servers, store, Clock(NOW))
        parked = await bot.reply(dm(ALICE, "at 10 post the AQI"))
        [ask] = parked.waiting
        answered = await bot.answer(ask.id, ALICE, Deny())
        final = await bot.resume(answered.resume[0])
        assert final is not None and "denied" in tool_texts(model)[0]
    assert await store.schedules_of(owner(dm(ALICE), bot)) == []


@pytest.mark.parametrize(
    ("at", "repeat", "timezone", "said"),
    [
        ("2026-12-08T09:00", "FREQ=SOMETIMES", "", "FREQ"),
        ("2026-12-08T09:00", "", "Mars/Olympus", "'Mars/Olympus' is not a time zone"),
        ("2026-12-07T08:59", "", "Europe/Paris", "is in the past"),
        ("2026-12-08T09:00", "FREQ=MINUTELY", "", "at least 5 minutes apart"),
        ("next tuesday", "", "", "is not an ISO 8601 date-time"),
        # A folder of the zone database, not a zone: refused, not a crash of the turn.
        ("2026-12-08T09:00", "", "America", "'America' is not a time zone"),
        ("9999-12-31T23:59", "FREQ=DAILY", "", "is too far ahead"),
        # Every run repeats the first's wall time: one the clocks skip would move them all by an hour.
        ("2027-03-28T02:30", "FREQ=DAILY", "Europe/Paris", "the clocks skip it that day"),
    ],
)
async def test_a_schedule_that_cannot_be_made_is_refused_to_the_model_without_asking(
    no_servers, store, at, repeat, timezone, said
):
    made = schedule_call(at, repeat, timezone)
    async with FakeLLMServer([tool_reply(made), reply("Sorry.")]) as model:
        bot = agent_of(openai(model), no_servers, store, Clock(NOW))
        answer = await bot.reply(dm(ALICE, "schedule it"))
        [refusal] = tool_texts(model)
    assert not answer.waiting and answer.text.startswith("Sorry.")
    assert said in refusal
    assert await store.schedules_of(owner(dm(ALICE), bot)) == []


def shown_on_platforms(prompt: ApprovalPrompt) -> None:
    """Slack's and Discord's cards read the core's summary, with Confirm / Cancel and no "always"."""
    slack = slack_approval(prompt)
    said = json.dumps(slack.blocks, ensure_ascii=False)
    assert "⏰ *Schedule this?*" in said and "Tue 8 Dec 09:00 CET" in said and "Europe/Paris" in said
    buttons = [e["text"]["text"] for b in slack.blocks or [] if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["Confirm", "Cancel"]
    discord = discord_approval(prompt)
    [embed] = discord.embeds
    assert discord.content.startswith("⏰ **Schedule this?**")
    assert embed.title == "Schedule this?" and "Prompt: post the AQI" in (embed.description or "")
    labels = [item.item.label for item in discord_view(prompt).children]  # type: ignore[union-attr, attr-defined]
    assert labels == ["Confirm", "Cancel"]


def stored(incoming: Incoming, bot: Agent, schedule_id: str, prompt: str) -> Schedule:
    return Schedule(
        id=schedule_id,
        owner=owner(incoming, bot),
        owner_user=incoming.user_id,
        key=incoming.key,
        place="",
        prompt=prompt,
        first_at=NOW + 3600,
        rule="",
        timezone="UTC",
        status="active",
        created_at=NOW,
    )


async def test_a_person_at_the_limit_is_told_to_cancel_one_first(no_servers, store):
    async with FakeLLMServer([tool_reply(schedule_call("2026-12-08T09:00")), reply("Sorry.")]) as model:
        bot = agent_of(openai(model), no_servers, store, Clock(NOW), schedules_per_person=1)
        await store.add_schedule(stored(dm(ALICE), bot, "s00000001", "first"))
        answer = await bot.reply(dm(ALICE, "schedule it"))
        [refusal] = tool_texts(model)
    assert not answer.waiting and "you already have 1 schedules" in refusal


async def test_people_list_and_cancel_only_their_own_and_a_channel_shows_only_its_own(no_servers, store):
    script = [
        tool_reply(FakeCall(name="list_schedules", id="l1")),
        reply("listed"),
        tool_reply(FakeCall(name="cancel_schedule", arguments='{"schedule_id": "s0000000a"}', id="c1")),
        reply("no"),
        tool_reply(FakeCall(name="list_schedules", id="l2")),
        reply("listed here"),
        tool_reply(FakeCall(name="cancel_schedule", arguments='{"schedule_id": "s0000000a"}', id="c2")),
        reply("cancelled"),
    ]
    async with FakeLLMServer(script) as model:
        bot = agent_of(openai(model), no_servers, store, Clock(NOW))
        await store.add_schedule(stored(dm(ALICE), bot, "s0000000a", "alice in her DM"))
        await store.add_schedule(stored(channel(ALICE), bot, "s0000000b", "alice in general"))
        await store.add_schedule(stored(dm(BOB), bot, "s0000000c", "bob in his DM"))

        await bot.reply(dm(BOB, "what's scheduled?"))
        [listed] = tool_texts(model)
        assert [s["id"] for s in result(listed)["schedules"]] == ["s0000000c"]

        await bot.reply(dm(BOB, "cancel s0000000a"))
        assert "no schedule 's0000000a' of yours" in tool_texts(model)[-1]
        assert (await store.schedule("s0000000a")).status == "active"  # type: ignore[union-attr]

        await bot.reply(channel(ALICE, "what's scheduled?"))
        here = result(tool_texts(model)[-1])
        assert [s["id"] for s in here["schedules"]] == ["s0000000b"], "a DM's prompt stays out of a channel"
        assert "1 more" in here["elsewhere"]

        await bot.reply(dm(ALICE, "cancel s0000000a"))
    assert (await store.schedule("s0000000a")).status == "cancelled"  # type: ignore[union-attr]


async def test_the_offline_model_sets_lists_and_cancels_a_reminder(no_servers, store):
    clock = Clock(NOW)
    bot = agent_of(OfflineModel(), no_servers, store, clock)
    me = terminal("")

    parked = await bot.reply(terminal("remind me in 2 minutes to drink water"))
    [ask] = parked.waiting
    assert ask.approval is not None and ask.approval.calls[0].summary is not None
    assert "Prompt: Remind me to drink water" in ask.approval.calls[0].summary.text
    answered = await bot.answer(ask.id, me.user_id, Approve())
    final = await bot.resume(answered.resume[0])
    [made] = await store.schedules_of(owner(me, bot))
    assert made.first_at == NOW + 120 and made.rule == "" and made.status == "active"
    assert final is not None and made.id in final.text and final.text.startswith("Scheduled for ")

    listed = await bot.reply(terminal("what's scheduled?"))
    assert f"{made.id}: Remind me to drink water" in listed.text
    assert f"say “cancel reminder {made.id}”" in listed.text, "a real id, not a placeholder"
    also = await bot.reply(terminal("list my reminders"))
    assert made.id in also.text

    # Its due run: "Remind me to …" is the reminder itself, not a request to schedule it again.
    clock.now = NOW + 120
    run = await bot.run_scheduled(made, made.first_at)
    assert run.text == "⏰ Reminder: drink water." and not run.waiting
    assert [s.id for s in await store.schedules_of(owner(me, bot))] == [made.id]

    cancelled = await bot.reply(terminal(f"cancel reminder {made.id}"))
    assert cancelled.text == f"Cancelled {made.id}."
    assert (await store.schedule(made.id)).status == "cancelled"  # type: ignore[union-attr]


async def test_a_time_zone_is_the_persons_choice_else_the_platforms_hint_else_a_default(
    no_servers, store, monkeypatch
):
    bot = agent_of(OfflineModel(), no_servers, store, Clock(NOW))
    alice = bot.person(dm(ALICE).key, ALICE)
    assert await bot.time_zone_of(alice) == "UTC"
    assert await bot.time_zone_of(alice, "America/New_York") == "America/New_York"
    assert await bot.time_zone_of(alice, "Nowhere/Special") == "UTC", "a bad hint is ignored"
    assert await bot.set_time_zone(alice, "Europe/Paris") == "Europe/Paris"
    assert await bot.time_zone_of(alice, "America/New_York") == "Europe/Paris"
    with pytest.raises(ScheduleError, match="not a time zone"):
        await bot.set_time_zone(alice, "Mars/Olympus")
    assert await bot.set_time_zone(alice, "") == "UTC"

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    me = bot.person(terminal("").key, "me")
    assert await bot.time_zone_of(me) == "Asia/Tokyo", "the terminal runs on its person's own machine"


def test_the_machines_zone_is_read_from_the_localtime_link(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("TZ", raising=False)
    zoneinfo = tmp_path / "usr/share/zoneinfo/Europe"
    zoneinfo.mkdir(parents=True)
    (zoneinfo / "Paris").write_bytes(b"TZif")
    link = tmp_path / "localtime"
    link.symlink_to(zoneinfo / "Paris")
    assert local_time_zone(link) == "Europe/Paris"
    assert local_time_zone(tmp_path / "missing") == "UTC"


def test_the_card_names_the_next_three_times_in_the_persons_zone() -> None:
    first = timing.parse_at("2026-12-08T09:00", "Europe/Paris")
    slots = timing.next_slots(first, "FREQ=WEEKLY", "Europe/Paris", first - 1, 3)
    assert [timing.local_text(s, "Europe/Paris") for s in slots] == [
        "Tue 8 Dec 09:00 CET",
        "Tue 15 Dec 09:00 CET",
        "Tue 22 Dec 09:00 CET",
    ]


def test_a_server_named_schedules_is_refused_because_the_schedule_tools_use_the_name(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"schedules": {"command": "npx", "args": ["cron-server"]}}}))
    with pytest.raises(ConfigError, match="server name 'schedules' is nerve's own"):
        load_mcp_config(path, {}, platforms=PLATFORMS)


async def test_nerve_ask_yes_never_confirms_a_schedule(tmp_path: Path) -> None:
    env = nerve_env(tmp_path, servers={})
    code, out, err = await run_nerve("ask", "--yes", "remind me in 2 minutes to drink water", env=env)
    assert "nerve: not scheduled: a schedule needs your own confirmation" in err, (code, out, err)
    assert "I didn't schedule that" in out
    store = await SQLiteStore.open(tmp_path / "nerve.db")
    try:
        assert await store.all_schedules(include_ended=True) == []
    finally:
        await store.close()


async def test_a_reminder_confirmed_after_its_time_is_kept_to_run_at_once_and_an_hour_late_is_refused(
    no_servers, store
):
    clock = Clock(NOW)
    bot = agent_of(OfflineModel(), no_servers, store, clock, approval_timeout=7200)
    me = terminal("")

    first = await bot.reply(terminal("remind me in 2 minutes to drink water"))
    clock.now = NOW + 300  # confirmed three minutes after it was due
    answered = await bot.answer(first.waiting[0].id, me.user_id, Approve())
    kept = await bot.resume(answered.resume[0])
    assert kept is not None and kept.text.startswith("Scheduled")

    second = await bot.reply(terminal("remind me in 2 minutes to stretch"))
    clock.now += 120 + 3601  # confirmed over an hour after it was due
    answered = await bot.answer(second.waiting[0].id, me.user_id, Approve())
    refused = await bot.resume(answered.resume[0])
    assert refused is not None and "is in the past" in refused.text
    assert [s.prompt for s in await store.schedules_of(owner(me, bot))] == ["Remind me to drink water"]


async def test_the_terminal_asks_to_confirm_a_schedule_as_its_card_and_never_offers_always(
    no_servers, store, monkeypatch
):
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # the terminal's person lives where its machine does
    # The card's time limit is read against the real clock where it is asked: the test's clock is now.
    now = float(int(time.time() // 60) * 60)
    bot = agent_of(OfflineModel(), no_servers, store, Clock(now))
    parked = await bot.reply(terminal("remind me in 2 minutes to drink water"))
    prompt = parked.waiting[0].approval
    assert prompt is not None
    asked: list[str] = []
    answers = iter(["a", "y"])  # "always" is no answer to a schedule: asked again

    async def read(question: str) -> str | None:
        asked.append(question)
        return next(answers)

    console = Console(record=True, width=120)
    await ask_each(bot, prompt, "me", read, console)
    shown = console.export_text()
    assert "⏰ Schedule this?" in shown and "Prompt: Remind me to drink water" in shown
    assert f"Runs once: {timing.local_text(now + 120, 'Asia/Tokyo')}" in shown
    assert "Time zone: Asia/Tokyo" in shown
    assert "Answer y (confirm it) or n (do not)." in shown
    assert asked == ["Confirm it? [y]es / [n]o "] * 2
    final = await bot.resume(prompt.request_id)
    assert final is not None and final.text.startswith("Scheduled")


async def test_the_schedule_tools_are_offered_only_where_a_front_end_runs_schedules(no_servers, store):
    """Where no front end runs schedules (here Discord, left out of the platforms that do) a reminder
    confirmed would never fire, so its turns are not offered the tools (nor told the time for them);
    the terminal's and Slack's are. Every platform's front end runs them by default."""
    assert RUNS_ON is None  # by default: every platform
    async with FakeLLMServer([reply("No."), reply("Yes."), reply("Yes.")]) as model:
        bot = Agent(
            llm=openai(model),
            host=no_servers,
            store=store,
            inbox=store,
            approvals=store,
            memories=store,
            schedules=store,
            clock=Clock(NOW),
            config=AgentConfig(platforms=PLATFORMS, schedules_run_on=frozenset({"terminal", "slack"})),
        )
        on_discord = Incoming(
            key=ConversationKey(platform="discord", workspace="G1", channel="C1", thread="C1"),
            text="remind me in 20 minutes to stretch",
            user_id="42",
        )
        await bot.reply(on_discord)
        await bot.reply(terminal("remind me in 20 minutes to stretch"))
        await bot.reply(dm(ALICE, "remind me in 20 minutes to stretch"))
        offered = [{t["function"]["name"] for t in r.get("tools", [])} for r in model.requests]
    assert "schedule" not in offered[0] and "remember" in offered[0]
    assert all({"schedule", "list_schedules", "cancel_schedule"} <= tools for tools in offered[1:])


async def test_a_cancel_after_a_tools_text_waits_for_its_person(loop_host, store):
    """Cancelled is final: a tool's result could carry an instruction to cancel, so a cancel in a turn
    that read one waits for its person's word, as a memory's forget does."""
    me = terminal("")
    script = [
        Step(calls=[Call("get_environment_status", {"area_code": "A1001"})]),
        Step(calls=[Call("cancel_schedule", {"schedule_id": "s00000007"})]),
        Step(text="Cancelled."),
    ]
    bot = agent_of(ScriptedLLM(script), loop_host, store, Clock(NOW))
    await store.add_schedule(stored(me, bot, "s00000007", "check the air"))
    answer = await bot.reply(terminal("what is the air in A1001? then cancel my reminder"))
    assert answer.waiting, "the cancel waits for its person"
    assert (await store.schedule("s00000007")).status == "active"  # type: ignore[union-attr]


async def test_a_confirmed_schedule_run_again_after_a_crash_makes_no_second_schedule(no_servers, store):
    """A resumed turn whose process died after the schedule was stored runs the confirmed call once
    more: the schedule it made stands, and no twin would run each slot a second time."""
    bot = agent_of(OfflineModel(), no_servers, store, Clock(NOW))
    me = terminal("")
    tools = bot.schedule_tools
    assert tools is not None
    arguments = {
        "prompt": "post the AQI",
        "at": "2026-12-08T09:00",
        "repeat": "FREQ=DAILY",
        "timezone": "UTC",
    }
    context = CallContext(tool="schedule", owner="o", incoming=me, approved=True)
    first = await tools.call_tool("schedule", arguments, context)
    again = await tools.call_tool("schedule", arguments, context)
    [made] = await store.schedules_of(owner(me, bot))
    assert not first.is_error and not again.is_error
    assert result(first.content)["id"] == result(again.content)["id"] == made.id
