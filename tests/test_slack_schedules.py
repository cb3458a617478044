"""Schedules on Slack: a reminder asked of the model waits on its card (the prompt, where, when, the zone)
for its person alone to confirm, is then stored and runs once in its DM when due, and cancelled on its
card stores nothing; a due DM reminder is answered in the DM, once; a channel schedule posts one message
naming its person and answers in its thread, with the tool results; a write it wants waits for its
person, mentions them and goes on once they approve; a run started again for its slot (handed on after
its process stopped, before or after keeping its message) posts no second message; the bot runs its
schedules from its start and claims none while draining; `/nerve schedules` lists a person's own and
pauses or cancels them (typed or with its buttons); `/nerve timezone` sets a zone and refuses one that
is none; and the zone of a person's Slack profile reaches their turns, asked once (a refusal costs the
zone, never the answer).

The real bolt app serves signed HTTP deliveries and talks to the mock Slack Web API; the model is the
local fake model service; the store is real. The runner looks when the test says (`tick`), on a
fake clock.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from adapters.common.schedules import scheduled_note
from adapters.settings import PLATFORMS
from bot.agent import AgentConfig
from bot.asks.parking import NOT_YOURS_TO_SCHEDULE
from bot.schedules import timing
from bot.schedules.runner import ScheduleRunner
from bot.types import ConversationKey, Person, Schedule, ToolResult
from tests import test_slack_approvals as approvals
from tests.fakes.clock import Clock
from tests.fakes.llm_server import reply, told, tool_reply
from tests.fakes.slack_api import BOT_USER_ID, TEAM_ID, Posted
from tests.stores import Backend
from tests.test_schedule_runner import a_schedule as stored_schedule
from tests.test_slack_harness import Rig, dm, mention, rig, user_texts
from tests.test_slack_memory import buttons_of, listed, press

pytestmark = pytest.mark.both_stores
# The approvals test server (tests/mcp_servers/trust.py) and its notes file, as its tests start them.
host, notes = approvals.host, approvals.notes

NOW = 1_796_630_400.0  # Mon 7 Dec 2026 09:00 in Paris
MINUTE, DAY = 60.0, 86_400.0
CHANNEL, DM = "C0CHANNEL", "D0ALICE"
ALICE, BOB, ADMIN = "U0ALICE", "U0BOB", "U0ADMIN"


def person(user: str) -> Person:
    return Person(id=f"slack:{TEAM_ID}:{user}", platform="slack", user_id=user, workspace=TEAM_ID)


def a_schedule(
    prompt: str, first_at: float, *, channel: str = DM, user: str = ALICE, rule: str = ""
) -> Schedule:
    """`user`'s schedule made in `channel` (a DM by default), its wall clock Paris's."""
    dm = channel.startswith("D")
    return stored_schedule(
        rule,
        first_at,
        owner=person(user).id,
        owner_user=user,
        key=ConversationKey(
            platform="slack", workspace=TEAM_ID, channel=channel, thread="dm" if dm else "1600000000.000100"
        ),
        place="your DM with nerve (Slack)" if dm else f"channel {channel} (Slack)",
        prompt=prompt,
        created_at=first_at - DAY,
    )


async def runs(runner: ScheduleRunner) -> None:
    """One look of the runner, and the runs it started run to their end."""
    await runner.tick()
    await runner.wait_for_runs()


def top_level(r: Rig, channel: str) -> list[Posted]:
    return r.slack.thread(channel, None)


async def test_a_dm_reminder_is_answered_in_the_dm_once_with_how_to_stop_it(tmp_path, store_backend: Backend):
    async with rig(tmp_path, [reply("Time to check the air in A1001.")], backend=store_backend) as r:
        due = a_schedule("remind me to check the air in A1001", NOW - 17 * MINUTE)
        await r.store.add_schedule(due)
        runner = r.bot.schedules.start(clock=Clock(NOW), forever=False)

        await runs(runner)
        await runs(runner)  # a second look runs nothing again

        [answer] = top_level(r, DM)
        assert "Time to check the air in A1001." in answer.text
        assert scheduled_note(due.id, "/nerve schedules") in answer.text
        assert "due at 08:43, run at 09:00" in answer.text  # 17 minutes late, in Paris
        assert not any("Scheduled for" in p.everything() for p in r.slack.posted)  # no announcement in a DM
        assert len(r.llm.requests) == 1
        assert user_texts(r.llm.requests[0])[-1] == "remind me to check the air in A1001"
        [run] = await r.store.runs_of(due.id)
        assert (run.status, run.note) == ("answered", None)


def schedule_call(prompt: str, at: str) -> Any:
    """The model's `schedule` call: `prompt` once at `at`, in the person's own zone."""
    return tool_reply(("schedule", json.dumps({"prompt": prompt, "at": at, "repeat": "", "timezone": ""})))


def cards_in(r: Rig, channel: str, thread: str | None = None) -> list[Posted]:
    """The confirmation cards (approval messages) posted in a channel or one of its threads."""
    return [p for p in r.slack.thread(channel, thread) if "nerve_approval" in json.dumps(p.versions[0])]


def labelled(card: Posted) -> dict[str, dict[str, Any]]:
    """The card's buttons by their label."""
    return {b["text"]["text"]: b for b in approvals.buttons(card)}


async def test_a_reminder_asked_in_a_dm_is_confirmed_on_its_card_by_its_person_only_then_runs_once_there(
    tmp_path, store_backend: Backend
):
    script = [
        schedule_call("remind me to stretch", "2026-12-07T09:05"),
        reply("I'll remind you at 09:05."),
        reply("Time to stretch!"),
    ]
    config = AgentConfig(admins=frozenset({ADMIN}), platforms=PLATFORMS)
    clock = Clock(NOW)
    async with rig(
        tmp_path, script, approvals=True, schedules=True, clock=clock, config=config, backend=store_backend
    ) as r:
        r.slack.zones[ALICE] = "Europe/Paris"

        # A top-level DM is the root of its own thread, answered there (Agent messaging experience).
        root = "1600000000.700100"
        await r.deliver(dm("remind me in 5 minutes to stretch", ts=root))
        await r.settle()

        [card] = cards_in(r, DM, root)
        shown = json.dumps(card.current["blocks"], ensure_ascii=False)
        assert "⏰ *Schedule this?*" in shown
        assert "Prompt: remind me to stretch" in shown
        assert "Where: your DM with nerve (Slack)" in shown
        assert "Runs once: Mon 7 Dec 09:05 CET" in shown and "Time zone: Europe/Paris" in shown
        assert f"Only <@{ALICE}> (who asked) can decide" in shown and "admin" not in shown, (
            "the card names who may confirm it: its person, never an admin"
        )
        buttons = labelled(card)
        assert set(buttons) == {"Confirm", "Cancel"}, "asked every time: no button to always allow it"
        assert await r.store.schedules_of(person(ALICE).id) == [], "nothing is scheduled unconfirmed"
        assert len(r.llm.requests) == 1, "the turn waits for its person"

        await approvals.click(r, card, buttons["Confirm"], BOB)
        await approvals.click(r, card, buttons["Confirm"], ADMIN)

        assert approvals.ephemerals(r, BOB) == [NOT_YOURS_TO_SCHEDULE], "not told an admin could"
        assert approvals.ephemerals(r, ADMIN) == [NOT_YOURS_TO_SCHEDULE], "not even an admin confirms it"
        assert await r.store.schedules_of(person(ALICE).id) == []
        assert await r.store.schedules_of(person(BOB).id) == []
        assert len(r.llm.requests) == 1

        await approvals.click(r, card, buttons["Confirm"], ALICE)

        assert approvals.buttons(card) == [], "decided: the buttons are gone"
        assert f"<@{ALICE}>" in json.dumps(card.current["blocks"]), "it names who confirmed it"
        [stored] = await r.store.schedules_of(person(ALICE).id)
        assert (stored.status, stored.prompt, stored.rule, stored.timezone) == (
            "active",
            "remind me to stretch",
            "",
            "Europe/Paris",
        )
        assert stored.first_at == NOW + 5 * MINUTE and stored.owner_user == ALICE
        assert stored.key.channel == DM and stored.place == "your DM with nerve (Slack)"
        assert len(r.llm.requests) == 2
        told = json.dumps(r.llm.requests[1]["messages"][-1], ensure_ascii=False)
        assert stored.id in told and "Mon 7 Dec 09:05 CET" in told, "the model reads what was made"
        assert r.slack.thread(DM, root)[-1].text == "I'll remind you at 09:05."

        runner = r.bot.schedules.start(clock=clock, forever=False)
        clock.now = NOW + 4 * MINUTE
        await runs(runner)
        assert len(r.llm.requests) == 2, "not due yet"
        clock.now = NOW + 6 * MINUTE
        await runs(runner)
        await runs(runner)

        [ran] = [p for p in r.slack.posted if "Time to stretch!" in p.text]
        assert ran.channel == DM and scheduled_note(stored.id, "/nerve schedules") in ran.text
        assert ran.thread_ts == root, "where it was asked"
        assert len(r.llm.requests) == 3
        assert user_texts(r.llm.requests[2])[-1] == "remind me to stretch"
        [run] = await r.store.runs_of(stored.id)
        assert run.status == "answered"


async def test_a_reminder_cancelled_on_its_card_in_a_channel_stores_nothing(tmp_path, store_backend: Backend):
    script = [schedule_call("remind me to stretch", "2026-12-07T09:05"), reply("Not scheduled, then.")]
    async with rig(
        tmp_path,
        script,
        approvals=True,
        schedules=True,
        clock=Clock(NOW),
        config=AgentConfig(platforms=PLATFORMS),
        backend=store_backend,
    ) as r:
        r.slack.zones[ALICE] = "Europe/Paris"
        root = "1600000000.800100"

        await r.deliver(mention(f"<@{BOT_USER_ID}> remind me in 5 minutes to stretch", ts=root))
        await r.settle()
        [card] = cards_in(r, CHANNEL, root)
        assert f"Where: channel {CHANNEL} (Slack)" in json.dumps(card.current["blocks"], ensure_ascii=False)

        await approvals.click(r, card, labelled(card)["Cancel"], ALICE)

        assert approvals.buttons(card) == []
        assert await r.store.schedules_of(person(ALICE).id) == []
        assert "denied" in json.dumps(r.llm.requests[1]["messages"][-1])
        assert r.slack.thread(CHANNEL, root)[-1].text == "Not scheduled, then."


async def test_a_channel_schedule_posts_one_message_and_answers_in_its_thread(
    tmp_path, store_backend: Backend
):
    script = [tool_reply(("get_aqi", "{}")), reply("The AQI in A1001 is 21.")]
    tools = {"get_aqi": lambda _a: ToolResult(content='{"aqi": 21}')}
    async with rig(tmp_path, script, tools=tools, backend=store_backend) as r:
        due = a_schedule("post the AQI for <A1001> & co", NOW - MINUTE, channel=CHANNEL, rule="FREQ=DAILY")
        await r.store.add_schedule(due)
        runner = r.bot.schedules.start(clock=Clock(NOW), forever=False)

        await runs(runner)

        [announced] = top_level(r, CHANNEL)
        assert announced.text == "⏰ Scheduled for <@U0ALICE>: post the AQI for &lt;A1001&gt; &amp; co"
        thread = r.slack.thread(CHANNEL, announced.ts)
        answers = [p for p in thread if "The AQI in A1001 is 21." in p.text]
        assert len(answers) == 1
        assert "get_aqi" in answers[0].everything(), "the tool's result is attached as in any answer"
        assert scheduled_note(due.id, "/nerve schedules") in answers[0].text
        assert r.host.calls == [("get_aqi", {})]
        run = await r.agent.schedule_run(due.id, due.first_at)
        assert run is not None and run.status == "answered" and run.message == f"{CHANNEL}:{announced.ts}"


async def test_a_scheduled_write_waits_for_its_person_pings_them_and_goes_on_when_they_approve(
    tmp_path,
    host,
    notes,
    store_backend: Backend,
):
    async with rig(
        tmp_path,
        [approvals.read_and_add(), reply("Added it.")],
        host=host,
        approvals=True,
        backend=store_backend,
    ) as r:
        due = a_schedule("add hi to the note", NOW - MINUTE, channel=CHANNEL)
        await r.store.add_schedule(due)
        runner = r.bot.schedules.start(clock=Clock(NOW), forever=False)

        await runs(runner)

        assert approvals.ran(notes) == ["read_note"], "the write waits for its person"
        [announced] = top_level(r, CHANNEL)
        [approval] = approvals.approval_messages(r, announced.ts)
        assert f"<@{ALICE}>" in approval.everything(), "its person is mentioned, so Slack tells them"
        [run] = await r.store.runs_of(due.id)
        assert (run.status, run.note) == ("answered", "waits for a decision in its thread")

        assert await approvals.click(r, approval, approvals.button(approval, "approve", 0), BOB) == 200
        assert approvals.ran(notes) == ["read_note"], "only its person decides"
        assert await approvals.click(r, approval, approvals.button(approval, "approve", 0), ALICE) == 200

        assert approvals.ran(notes) == ["read_note", "append_note"]
        assert r.slack.thread(CHANNEL, announced.ts)[-1].text == "Added it."


async def test_the_bot_runs_its_schedules_from_its_start_until_it_closes(tmp_path, store_backend: Backend):
    async with rig(tmp_path, [reply("Stretch now.")], backend=store_backend) as r:
        due = a_schedule("remind me to stretch", time.time() - MINUTE)
        await r.store.add_schedule(due)

        r.bot.start_schedules()

        await r.slack.wait_for(lambda slack: any("Stretch now." in p.text for p in slack.thread(DM, None)))
        await r.bot.drain(5.0)
        later = a_schedule("remind me again", time.time() - MINUTE)
        await r.store.add_schedule(later)
        runner = r.bot.schedules.runner
        assert runner is not None
        assert (await runner.tick()).started == [], "a draining bot claims no new slot"
        await r.bot.aclose()
        assert r.bot.schedules.runner is runner and runner.running == 0
        assert [run.status for run in await r.store.runs_of(due.id)] == ["answered"]
        assert await r.store.runs_of(later.id) == []


async def test_a_run_started_again_for_its_slot_posts_no_second_message(tmp_path, store_backend: Backend):
    async with rig(tmp_path, [reply("Deploy check: all green.")], backend=store_backend) as r:
        due = a_schedule("ask me whether the deploy finished", NOW - MINUTE, channel=CHANNEL)
        await r.store.add_schedule(due)
        assert await r.store.claim_slot(due.id, due.first_at, at=NOW - MINUTE, late_by=0.0)

        first = await r.bot.schedules.run(due, due.first_at, 0.0)
        again = await r.bot.schedules.run(due, due.first_at, 0.0)  # handed on: the same slot once more

        assert first.status == again.status == "answered"
        [announced] = top_level(r, CHANNEL)
        answers = [p for p in r.slack.thread(CHANNEL, announced.ts) if "all green" in p.text]
        assert len(answers) == 1
        assert len(r.llm.requests) == 1


class Stopped(Exception):
    """The process stopped here."""


async def test_a_run_that_stopped_before_keeping_its_message_finds_it_and_posts_no_second(
    tmp_path, store_backend: Backend, monkeypatch: pytest.MonkeyPatch
):
    async with rig(tmp_path, [reply("The deploy finished.")], backend=store_backend) as r:
        due = a_schedule("did the deploy finish?", NOW - MINUTE, channel=CHANNEL)
        await r.store.add_schedule(due)
        assert await r.store.claim_slot(due.id, due.first_at, at=NOW - MINUTE, late_by=0.0)

        async def stopped(*_args: object) -> bool:
            raise Stopped

        monkeypatch.setattr(r.agent, "keep_run_message", stopped)
        with pytest.raises(Stopped):
            await r.bot.schedules.run(due, due.first_at, 0.0)  # posted, then stopped before keeping it
        monkeypatch.undo()
        handed_on = await r.bot.schedules.run(due, due.first_at, 0.0)

        assert handed_on.status == "answered"
        [announced] = top_level(r, CHANNEL)
        assert any("The deploy finished." in p.text for p in r.slack.thread(CHANNEL, announced.ts))
        run = await r.agent.schedule_run(due.id, due.first_at)
        assert run is not None and run.message == f"{CHANNEL}:{announced.ts}"


async def test_a_run_left_running_is_handed_on_under_the_message_it_kept(tmp_path, store_backend: Backend):
    async with rig(tmp_path, [reply("The backup finished at 08:58.")], backend=store_backend) as r:
        due = a_schedule("did the backup finish?", NOW - MINUTE, channel=CHANNEL)
        await r.store.add_schedule(due)
        # A process claimed the slot, posted its message and kept it, then stopped.
        assert await r.store.claim_slot(due.id, due.first_at, at=NOW - MINUTE, late_by=0.0)
        posted = await r.bot.client.chat_postMessage(channel=CHANNEL, text="⏰ Scheduled for <@U0ALICE>: …")
        assert await r.agent.keep_run_message(due.id, due.first_at, f"{CHANNEL}:{posted['ts']}")
        runner = r.bot.schedules.start(clock=Clock(NOW), forever=False)

        taken = await runner.hand_on()
        await runner.wait_for_runs()

        assert [t.schedule.id for t in taken] == [due.id]
        [announced] = top_level(r, CHANNEL)
        assert announced.ts == posted["ts"]
        assert any("The backup finished" in p.text for p in r.slack.thread(CHANNEL, announced.ts))
        [run] = await r.store.runs_of(due.id)
        assert run.status == "answered"


async def test_schedules_lists_my_own_and_changes_them_typed_or_with_buttons(
    tmp_path, store_backend: Backend
):
    async with rig(tmp_path, [], backend=store_backend) as r:
        daily = a_schedule("post the AQI", NOW + DAY, channel=CHANNEL, rule="FREQ=DAILY")
        once = a_schedule("water the plants", NOW + DAY)
        bobs = a_schedule("BOB-CANARY bob's reminder", NOW + DAY, user=BOB)
        for schedule in (daily, once, bobs):
            await r.store.add_schedule(schedule)

        shown = await listed(r, ALICE, "schedules")

        everything = json.dumps(shown)
        assert "BOB-CANARY" not in everything
        upcoming = timing.next_slots(daily.first_at, daily.rule, daily.timezone, NOW, 1)[0]
        lines = [b["text"]["text"] for b in shown["blocks"] if b.get("type") == "section"]
        [line] = [text for text in lines if daily.id in text]
        assert "post the AQI" in line and f"channel {CHANNEL}" in line and "FREQ=DAILY" in line
        assert f"next: {timing.local_text(upcoming, 'Europe/Paris')}" in line and "last: not run yet" in line
        pressed = buttons_of(shown["blocks"])
        assert {(b["action_id"], b["value"]) for b in pressed} == {
            ("nerve_schedule.pause", daily.id),
            ("nerve_schedule.cancel", daily.id),
            ("nerve_schedule.pause", once.id),
            ("nerve_schedule.cancel", once.id),
        }
        assert all("confirm" in b for b in pressed if b["action_id"] == "nerve_schedule.cancel")

        assert "not yours" in (await listed(r, BOB, f"schedules cancel {daily.id}"))["text"]
        assert (await listed(r, ALICE, f"schedules cancel {daily.id}"))["text"] == f"Cancelled {daily.id}."
        [pause] = [b for b in pressed if b["action_id"] == "nerve_schedule.pause" and b["value"] == once.id]
        assert await press(r, ALICE, pause) == f"Paused {once.id}."
        [cancel] = [b for b in pressed if b["action_id"] == "nerve_schedule.cancel" and b["value"] == once.id]
        assert "not yours" in await press(r, BOB, cancel)

        assert (await r.agent.schedule(daily.id)).status == "cancelled"  # type: ignore[union-attr]
        assert (await r.agent.schedule(once.id)).status == "paused"  # type: ignore[union-attr]
        assert (await r.agent.schedule(bobs.id)).status == "active"  # type: ignore[union-attr]
        again = buttons_of((await listed(r, ALICE, "schedules"))["blocks"])
        assert {(b["action_id"], b["value"]) for b in again} == {
            ("nerve_schedule.resume", once.id),
            ("nerve_schedule.cancel", once.id),
        }
        bobs_list = json.dumps(await listed(r, BOB, "schedules"))
        assert "BOB-CANARY" in bobs_list and "water the plants" not in bobs_list


async def test_timezone_sets_mine_refuses_what_is_no_zone_and_resets_to_my_profiles(
    tmp_path, store_backend: Backend
):
    async with rig(tmp_path, [], backend=store_backend) as r:
        r.slack.zones[ALICE] = "America/New_York"
        alice = person(ALICE)

        shown = (await listed(r, ALICE, "timezone"))["text"]
        assert (
            shown.startswith("Your time zone is America/New_York (it is") and "/nerve timezone reset" in shown
        )
        told = await listed(r, ALICE, "timezone Europe/Paris")
        assert told["text"].startswith("Your time zone is now Europe/Paris")
        assert await r.agent.time_zone_of(alice) == "Europe/Paris"

        refused = (await listed(r, ALICE, "timezone Mars/Olympus"))["text"]
        assert "'Mars/Olympus' is not a time zone" in refused and "Europe/Paris" in refused
        assert await r.agent.time_zone_of(alice) == "Europe/Paris"

        reset = (await listed(r, ALICE, "timezone reset"))["text"]
        assert reset == "Your time zone is back to the default: America/New_York."
        assert (
            await r.agent.time_zone_of(alice) == "UTC"
        )  # what they set is gone: their profile's is the hint


async def test_the_zone_of_my_slack_profile_reaches_my_turns_asked_once(tmp_path, store_backend: Backend):
    script = [reply("Noted."), reply("Noted again.")]
    async with rig(tmp_path, script, approvals=True, schedules=True, backend=store_backend) as r:
        r.slack.zones[ALICE] = "Asia/Tokyo"

        for root in ("1600000000.700001", "1600000000.700002"):
            await r.deliver(mention(f"<@{BOT_USER_ID}> what time is it?", ts=root, user=ALICE))
            await r.settle()

        for request in r.llm.requests:
            system = told(request)
            assert "the person's time zone Asia/Tokyo" in system
        assert len(r.slack.calls_of("users.info")) == 1, "asked once, then known for a while"
        tools = {t["function"]["name"] for t in r.llm.requests[0].get("tools") or []}
        assert any(name.endswith("schedule") for name in tools), "the schedule tools are offered on Slack"


async def test_a_profile_slack_will_not_show_costs_the_zone_never_the_answer(
    tmp_path, store_backend: Backend
):
    script = [reply("Here."), reply("Here again.")]
    async with rig(tmp_path, script, approvals=True, schedules=True, backend=store_backend) as r:
        r.slack.fail_next["users.info"] = "missing_scope"

        for root in ("1600000000.700003", "1600000000.700004"):
            await r.deliver(mention(f"<@{BOT_USER_ID}> what time is it?", ts=root, user=ALICE))
            await r.settle()

        for request in r.llm.requests:
            assert "the person's time zone UTC" in told(request)
        assert [p.text for p in r.slack.thread(CHANNEL, "1600000000.700004")] == ["Here again."]
        assert len(r.slack.calls_of("users.info")) == 1, "refused once: not asked again"
