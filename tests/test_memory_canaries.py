"""Fifty people and ten shared threads save memories: none reaches a request it is not for.

Every person saves a personal memory holding a canary only they know, in one of their three DM
threads; some let nerve use it anywhere, most keep it to their DMs. Every shared thread saves a memory
for its channel, with a canary of its own. Then every person asks in their two other DM threads, and
people ask in the shared threads and in new ones. Every request the model was sent is checked: no
other person's canary, no DM-only canary where a channel reads the answer, no place's canary outside
its channel; and each person's own canary in each of their later DM requests (the memory worked).

Everything is real but Slack and the model: the bolt app over signed HTTP deliveries, the mock Slack
Web API, the `openai` client against the local model service, the store (SQLite, or PostgreSQL on
the suite's PostgreSQL pass; `tests/test_memory_store.py` runs the same scopes on both).
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.settings import PLATFORMS
from bot.agent import AgentConfig
from tests.fakes.llm_server import Reply, reply, tool_reply
from tests.fakes.slack_api import BOT_USER_ID
from tests.test_slack_harness import Rig, dm, mention, rig

PEOPLE = 50
CHANNELS = 5
THREADS_EACH = 2
SEED = 2113
# A give-up for a turn that never ends, not a speed check (the figure below prints how long it took).
GIVE_UP = 90.0
PERSONAL = re.compile(r"PCAN-(\d{3})-[0-9a-f]{8}")
PLACE = re.compile(r"LCAN-(\d{2})-[0-9a-f]{8}")
TAG = re.compile(r"\bturn-(\d{4})\b")
REMEMBER = re.compile(
    r"remember (?P<here>for everyone here )?(?P<anywhere>anywhere )?(?P<canary>[PL]CAN-\S+)"
)


def anywhere(i: int) -> bool:
    """Every fourth person lets nerve use their memory in shared places too."""
    return i % 4 == 0


def user_id(i: int) -> str:
    return f"U{i:03d}MEM"


def dm_channel(i: int) -> str:
    return f"D{i:03d}MEM"


def channel_id(c: int) -> str:
    return f"C{c:02d}MEMCH"


def dm_thread(i: int, k: int) -> str:
    return f"1700000000.{i:03d}{k}00"


def shared_thread(t: int) -> str:
    return f"1700000100.{t:06d}"


def channel_of(t: int) -> int:
    return t // THREADS_EACH


@dataclass(frozen=True, slots=True)
class Turn:
    person: int
    # None: the person's DM.
    channel: int | None
    wave: int


def model(request: dict[str, Any]) -> Reply:
    """Calls `remember` when the message asks to remember; answers plainly otherwise."""
    messages = request["messages"]
    if messages[-1].get("role") == "tool":
        return reply("Done.")
    asked = REMEMBER.search(str(messages[-1].get("content") or ""))
    if asked is None:
        return reply("Noted, thank you.")
    arguments = {
        "text": f"the canary is {asked['canary']}",
        "about": "here" if asked["here"] else "me",
        "anywhere": bool(asked["anywhere"]),
    }
    return tool_reply(("remember", json.dumps(arguments)))


def turn_of(request: dict[str, Any], turns: dict[int, Turn]) -> Turn:
    """The turn a request belongs to: the tag of the last message a person wrote in it."""
    said = [m for m in request["messages"] if m.get("role") == "user"]
    assert said, "a request without the person's message"
    found = TAG.findall(str(said[-1].get("content") or ""))
    assert len(found) == 1, f"no single turn tag in {said[-1]!r}"
    return turns[int(found[0])]


async def test_memories_reach_only_their_person_and_their_place(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    mine = {i: f"PCAN-{i:03d}-{rng.getrandbits(32):08x}" for i in range(PEOPLE)}
    threads = CHANNELS * THREADS_EACH
    ours = {t: f"LCAN-{t:02d}-{rng.getrandbits(32):08x}" for t in range(threads)}
    turns: dict[int, Turn] = {}

    def tagged(text: str, turn: Turn) -> str:
        tag = len(turns)
        turns[tag] = turn
        return f"{text} (turn-{tag:04d})"

    def in_dm(i: int, k: int, text: str, wave: int) -> dict[str, Any]:
        said = tagged(text, Turn(i, None, wave))
        return dm(said, channel=dm_channel(i), user=user_id(i), thread_ts=dm_thread(i, k))

    def in_channel(i: int, c: int, text: str, wave: int, **where: Any) -> dict[str, Any]:
        said = tagged(f"<@{BOT_USER_ID}> {text}", Turn(i, c, wave))
        return mention(said, channel=channel_id(c), user=user_id(i), **where)

    first = [
        in_dm(i, 0, f"remember {'anywhere ' if anywhere(i) else ''}{mine[i]}", wave=1) for i in range(PEOPLE)
    ]
    first += [
        in_channel(t * 5, channel_of(t), f"remember for everyone here {ours[t]}", 1, ts=shared_thread(t))
        for t in range(threads)
    ]
    rng.shuffle(first)
    # One asker per shared thread (every fourth of them lets their memory be used there), and five
    # more in new threads of their own; everyone in their two other DM threads.
    in_threads = [0, 4, 8, 1, 2, 3, 5, 6, 7, 9]
    in_new_threads = [12, 13, 14, 15, 16]
    second = [in_dm(i, k, "what do you remember about me?", wave=2) for i in range(PEOPLE) for k in (1, 2)]
    second += [
        in_channel(i, channel_of(t), "what should we know here?", 2, thread_ts=shared_thread(t))
        for t, i in enumerate(in_threads)
    ]
    second += [
        in_channel(i, n % CHANNELS, "what should we know here?", 2) for n, i in enumerate(in_new_threads)
    ]
    rng.shuffle(second)

    config = AgentConfig(max_concurrent_turns=16, turn_queue=len(first) + len(second), platforms=PLATFORMS)
    started = time.monotonic()
    async with rig(tmp_path, model, config=config, memories=True) as r:
        for wave in (first, second):
            statuses = await asyncio.gather(*(r.deliver(body) for body in wave))
            assert set(statuses) == {200}
            await r.settle(within=GIVE_UP)
        elapsed = time.monotonic() - started
        requests = r.llm.requests
        leaks = foreign_canaries_in_slack_calls(r)

    # A remember is two requests (the call, then the answer after its result); a question one.
    assert len(requests) == 2 * len(first) + len(second)
    checked = 0
    for request in requests:
        turn = turn_of(request, turns)
        sent = json.dumps(request["messages"], ensure_ascii=False)
        people = {int(n) for n in PERSONAL.findall(sent)}
        places = {channel_of(int(n)) for n in PLACE.findall(sent)}
        assert people <= {turn.person}, f"{turn}: another person's memory was sent: {people}"
        if turn.channel is None:
            assert places == set(), f"{turn}: a channel's memory was sent to a DM"
        else:
            assert places <= {turn.channel}, f"{turn}: another channel's memory was sent"
            assert anywhere(turn.person) or not people, f"{turn}: a DM-only memory was sent to a channel"
        if turn.wave == 2:
            if turn.channel is None:
                assert mine[turn.person] in sent, f"{turn}: their own memory was not sent"
            else:
                wanted = [ours[t] for t in range(threads) if channel_of(t) == turn.channel]
                assert all(canary in sent for canary in wanted), (
                    f"{turn}: the channel's memories were not sent"
                )
                assert (mine[turn.person] in sent) == anywhere(turn.person), turn
            checked += 1
    assert checked == len(second)
    assert leaks == [], f"{len(leaks)} Slack calls showed a memory where it does not belong"
    print(
        f"\nfigure: {PEOPLE} people, {threads} shared threads, {len(requests)} model requests checked,"
        f" 0 memories out of scope, {elapsed:.1f} s"
    )


def foreign_canaries_in_slack_calls(r: Rig) -> list[tuple[str, str, str]]:
    """Every Slack Web API call that showed a canary outside its person's DM or its place's channel."""
    leaks = []
    for call in r.slack.calls:
        body = json.dumps(call.body, ensure_ascii=False)
        channel = str(call.body.get("channel") or call.body.get("channel_id") or "")
        for n in PERSONAL.findall(body):
            if channel != dm_channel(int(n)):
                leaks.append((call.method, channel, f"person {n}"))
        for n in PLACE.findall(body):
            if channel != channel_id(channel_of(int(n))):
                leaks.append((call.method, channel, f"thread {n}"))
    return leaks
