"""A person's data rights on Slack: `/nerve forget me` asks first (Cancel keeps everything), its
Delete button deletes only the asker's data, counted in the reply, and nobody else may press it (also
in a bot started anew); `/nerve export` uploads one JSON file of the person's data to their DM; both
work in a DM only.

The real bolt app serves signed HTTP deliveries and talks to the mock Slack Web API; the model is the
local fake model service; the store is real (SQLite and PostgreSQL).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from adapters.common.rights import AUDIT_KEPT, NOT_YOURS, NOTHING_DELETED
from bot.types import ConversationKey, Memory
from tests.fakes.llm_server import Reply, own_text, reply
from tests.fakes.slack_api import TEAM_ID, Posted
from tests.stores import Backend
from tests.test_slack_approvals import click_payload, command, ephemerals
from tests.test_slack_harness import Rig, dm, rig

pytestmark = pytest.mark.both_stores

ALICE, BOB = "U0ALICE", "U0BOB"
ALICE_DM, BOB_DM = "D0ALICE", "D0BOB"
FORM = "application/x-www-form-urlencoded"


def echo(body: dict[str, Any]) -> Reply:
    said = own_text([m for m in body["messages"] if m.get("role") == "user"][-1]["content"])
    return reply(f"echo: {said}")


def person(user: str) -> str:
    return f"slack:{TEAM_ID}:{user}"


def key(channel: str) -> ConversationKey:
    return ConversationKey(platform="slack", workspace=TEAM_ID, channel=channel, thread="-")


async def keep(r: Rig, text: str, of: str) -> Memory:
    return await r.store.add_memory(
        kind="person",
        subject=person(of),
        text=text,
        anywhere=False,
        written_by=person(of),
        written_in="slack:C1",
    )


async def alice_and_bob(r: Rig) -> None:
    """Alice and Bob each told nerve something in their DM and have a memory."""
    await keep(r, "alice likes canaryalice1", ALICE)
    await keep(r, "bob likes canarybob1", BOB)
    await r.deliver(dm("my code is canaryalice2", channel=ALICE_DM, user=ALICE))
    await r.settle()
    await r.deliver(dm("my code is canarybob2", channel=BOB_DM, user=BOB))
    await r.settle()


async def typed(r: Rig, text: str, user: str, channel: str) -> dict[str, Any]:
    status, body = await r.deliver_raw(command(text, user, channel), FORM)
    assert status == 200
    shown: dict[str, Any] = json.loads(body)
    assert shown["response_type"] == "ephemeral"
    return shown


async def press(r: Rig, user: str, pressed: dict[str, Any], channel: str) -> str:
    """`user` presses a button of the ephemeral question in `channel`; what only they were told."""
    before = len(ephemerals(r, user))
    message = Posted(
        channel=channel, ts="1600000000.999999", thread_ts=None, versions=[{"text": "", "blocks": []}]
    )
    raw = urlencode({"payload": json.dumps(click_payload(message, pressed, user))})
    status, _ = await r.deliver_raw(raw, FORM)
    assert status == 200
    await r.settle()
    told = ephemerals(r, user)[before:]
    assert len(told) == 1, told
    return told[0]


def buttons(shown: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = [e for b in shown["blocks"] if b.get("type") == "actions" for e in b["elements"]]
    return {b["text"]["text"]: b for b in found}


async def test_forget_me_asks_first_and_deletes_only_the_askers_data(tmp_path, store_backend: Backend):
    async with rig(tmp_path, echo, memories=True, backend=store_backend) as r:
        await alice_and_bob(r)

        elsewhere = await typed(r, "forget me", ALICE, "C0CHANNEL")
        assert "DM" in elsewhere["text"] and not elsewhere.get("blocks")

        asked = await typed(r, "forget me", ALICE, ALICE_DM)
        assert "cannot be undone" in asked["text"]
        labels = buttons(asked)
        assert set(labels) == {"Delete everything", "Cancel"}
        assert all(b["value"] == ALICE for b in labels.values()), "the buttons carry who asked, nothing else"

        assert await press(r, ALICE, labels["Cancel"], ALICE_DM) == NOTHING_DELETED
        assert "canaryalice2" in json.dumps(await r.agent.export_person(key(ALICE_DM), ALICE))
        assert await r.store.memories_of(person=person(ALICE)) != []

    # A bot started anew on the same database: the button carries all a press needs.
    async with rig(tmp_path, echo, memories=True, backend=store_backend) as again:
        assert await press(again, BOB, labels["Delete everything"], ALICE_DM) == NOT_YOURS
        assert await again.store.memories_of(person=person(ALICE)) != []

        told = await press(again, ALICE, labels["Delete everything"], ALICE_DM)
        assert "1 memory about you deleted" in told and "1 private conversation deleted" in told
        assert AUDIT_KEPT in told
        assert await again.store.memories_of(person=person(ALICE)) == []
        assert "canaryalice" not in json.dumps(await again.agent.export_person(key(ALICE_DM), ALICE))
        bobs = json.dumps(await again.agent.export_person(key(BOB_DM), BOB))
        assert "canarybob1" in bobs and "canarybob2" in bobs, "Bob's memory and messages stay"


async def test_export_uploads_the_persons_json_to_their_dm_only(tmp_path, store_backend: Backend):
    async with rig(tmp_path, echo, memories=True, backend=store_backend) as r:
        await alice_and_bob(r)

        elsewhere = await typed(r, "export", ALICE, "C0CHANNEL")
        assert "DM" in elsewhere["text"]
        assert r.slack.shared == []

        await typed(r, "export", ALICE, ALICE_DM)
        await r.settle()
        [shared] = r.slack.shared
        assert shared.channel == ALICE_DM and shared.filename == "nerve-export.json"
        document = json.loads(shared.data)
        assert document["person"]["id"] == person(ALICE)
        assert [m["text"] for m in document["memories"]] == ["alice likes canaryalice1"]
        assert "canaryalice2" in shared.data.decode()
        assert "canarybob" not in shared.data.decode(), "nothing of Bob's is in Alice's export"
