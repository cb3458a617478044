"""100 people DM nerve at once: nothing one of them said ever reaches another.

Each person's messages carry a canary only they know. The fake model echoes everything it was sent
(the whole conversation nerve built for that turn), so a history mixed up between conversations,
a reply posted into the wrong DM or a status line shown to the wrong person puts a foreign canary
where the assertions look. Everything is real but Slack and the model: the bolt app over signed HTTP
deliveries, the mock Slack Web API, the `openai` client against the local model service, the
SQLite store.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from pathlib import Path
from typing import Any

from bot.agent import AgentConfig
from tests.fakes.llm_server import Reply, reply
from tests.test_slack_harness import Rig, dm, rig

USERS = 100
MESSAGES_EACH = 2
SEED = 1307
# Canaries are fixed-width, so no canary is a prefix of another.
CANARY = re.compile(r"CANARY-\d{3}-[0-9a-f]{8}-m\d")
# Only a give-up for a turn that never ends: the canaries are the check, and how fast 200 turns go
# through is a load figure (printed below; `bench/many_channel_burst.py` measures it under load).
GIVE_UP = 120.0


def user_id(i: int) -> str:
    return f"U{i:04d}CAN"


def dm_channel(i: int) -> str:
    return f"D{i:04d}CAN"


def canary(i: int, n: int, rng: random.Random) -> str:
    return f"CANARY-{i:03d}-{rng.getrandbits(32):08x}-m{n}"


def echo_everything(request: dict[str, Any]) -> Reply:
    """Repeat every message of the request, the way a model leaking its context would."""
    seen = " | ".join(str(m.get("content") or "") for m in request["messages"] if m.get("role") != "system")
    return reply(f"I was sent: {seen}", delay=random.uniform(0.0, 0.05))


def canaries_in(text: str) -> set[str]:
    return set(CANARY.findall(text))


def owner(found: str) -> int:
    return int(found.split("-")[1])


def owners_in(messages: list[dict[str, Any]]) -> set[int]:
    return {owner(c) for c in canaries_in(json.dumps(messages))}


async def test_a_hundred_interleaved_dms_never_show_anyone_another_persons_canary(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    said = {i: [canary(i, n, rng) for n in range(MESSAGES_EACH)] for i in range(USERS)}
    # Every person's messages in their own order, the people interleaved at random.
    order = [i for i in range(USERS) for _ in range(MESSAGES_EACH)]
    rng.shuffle(order)
    sent = dict.fromkeys(range(USERS), 0)
    # Room for every message at once: a "busy" notice would carry no canary to check.
    config = AgentConfig(max_concurrent_turns=16, turn_queue=USERS * MESSAGES_EACH)
    started = time.monotonic()
    # Top-level DMs as one running conversation per person (the Assistant experience), so each second
    # message carries the first; on the Agent messaging experience each is a conversation of its own.
    experience = "assistant"
    async with rig(tmp_path, echo_everything, config=config, strict=False, slack_experience=experience) as r:
        r.slack.streaming = True
        deliveries = []
        for i in order:
            text = f"remember {said[i][sent[i]]} please"
            sent[i] += 1
            deliveries.append(r.deliver(dm(text, channel=dm_channel(i), user=user_id(i))))
        statuses = await asyncio.gather(*deliveries)
        assert set(statuses) == {200}
        await r.settle(within=GIVE_UP)
        await r.slack.wait_for(
            lambda s: all(len(answers(r, i)) == MESSAGES_EACH for i in range(USERS)), within=GIVE_UP
        )
        elapsed = time.monotonic() - started

        mixed = [owners for request in r.llm.requests if len(owners := owners_in(request["messages"])) > 1]
        assert mixed == [], f"{len(mixed)} model requests carried more than one person's words"
        # The second message's request carries the first: the echo sees the whole conversation.
        remembered = [
            q for q in r.llm.requests if len(canaries_in(json.dumps(q["messages"]))) == MESSAGES_EACH
        ]
        assert len(remembered) == USERS
        assert len(r.llm.requests) == USERS * MESSAGES_EACH

        leaks = foreign_canaries_in_slack_calls(r)
        assert leaks == [], f"{len(leaks)} Slack calls showed someone another person's canary"
        for i in range(USERS):
            replies = answers(r, i)
            assert len(replies) == MESSAGES_EACH
            shown = set().union(*(canaries_in(text) for text in replies))
            assert shown <= set(said[i])
            # Each reply carries the message it answers; every message was answered.
            assert shown == set(said[i]), f"user {i} did not get their own canaries back: {replies}"
    assert elapsed < GIVE_UP
    print(
        f"\nfigure: {USERS} people x {MESSAGES_EACH} interleaved DMs, {len(r.llm.requests)} model requests "
        f"and {len(r.slack.calls)} Slack calls checked, 0 foreign canaries, {elapsed:.1f} s"
    )


def answers(r: Rig, i: int) -> list[str]:
    """The final text of every message nerve posted in person `i`'s DM that answers them."""
    posted = [p.everything() for p in r.slack.posted if p.channel == dm_channel(i)]
    return [text for text in posted if "I was sent" in text]


def foreign_canaries_in_slack_calls(r: Rig) -> list[tuple[str, str, set[str]]]:
    """Every Slack Web API call that carried a canary of someone other than the DM's owner."""
    leaks = []
    for call in r.slack.calls:
        body = json.dumps(call.body, ensure_ascii=False)
        found = canaries_in(body)
        if not found:
            continue
        channel = str(call.body.get("channel") or call.body.get("channel_id") or "")
        match = re.fullmatch(r"D(\d{4})CAN", channel)
        owners = {owner(c) for c in found}
        if match is None or owners != {int(match.group(1))}:
            leaks.append((call.method, channel, found))
    return leaks
