"""1,000 fuzzed Discord deliveries through discord.py's own code: none crashes nerve, none is noisy.

The real bot (discord.py's client, gateway and command tree, nerve's handlers) runs against the fake
Discord; the fuzz sends it what Discord could: messages of every type with any text, from people,
bots and the bot itself, in channels, DMs and channels nerve never saw; slash commands with any
name and options; clicks with nerve's own custom-id shapes filled with garbage (approval, input,
results and disconnect buttons), modal submits with forged ids and fields, autocomplete with any
text. What must hold over the whole run:

* no handler raises (discord.py would log "Ignoring exception in …" with a traceback);
* nothing is logged at error, and at most one warning line per delivery on average: an ignored
  delivery costs one line at most;
* the bot is still connected and still answers a plain question at the end.

Derandomized: the same cases on every run, so a failure reproduces.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.store.sqlite import SQLiteStore
from tests.conftest import ROOT
from tests.fakes.discord_api import FakeDiscord, FakeUser, running_bot
from tests.fakes.llm_server import FakeLLMServer, reply
from tests.test_discord_approvals import approving_agent

CASES = 1000
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    derandomize=True,
    # Nothing is written to disk: the same cases run every time anyway.
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

texts = st.one_of(
    st.text(max_size=60),
    st.sampled_from(["@everyone", "<@&1>", "<#1>", "```", "hi", "reset", "/ask", "\u0000", "x" * 2100]),
)
snowflakes = st.integers(min_value=0, max_value=2**64 - 1).map(str)
tokens = st.from_regex(r"[A-Za-z0-9_\-.~*:]{0,30}", fullmatch=True)
hexes = st.from_regex(r"[0-9a-f]{0,14}", fullmatch=True)
custom_ids = st.one_of(
    st.builds(
        lambda a, r, c, h: f"nerve:ap:{a}:{r}:{c}:{h}", st.sampled_from("adADRx"), tokens, tokens, hexes
    ),
    st.builds(lambda a, r, s: f"nerve:in:{a}:{r}{s}", st.sampled_from("fdosmx"), tokens, tokens),
    st.builds(lambda r: f"nerve:tools:{r}", hexes),
    st.builds(lambda s: f"nerve:dc:{s}", st.text(max_size=30)),
    st.text(max_size=100),
)
modal_ids = st.one_of(
    st.builds(lambda r, s, b: f"nerve:in:m:{r}:{s}:{b}", tokens, st.integers(0, 120).map(str), hexes),
    st.text(max_size=100),
)
text_input = st.fixed_dictionaries(
    {"type": st.just(4), "custom_id": st.sampled_from(["f0", "f1", "f9", "x"]), "value": texts}
)
select = st.fixed_dictionaries(
    {
        "type": st.just(3),
        "custom_id": st.sampled_from(["f0", "f1", "x"]),
        "values": st.lists(texts, max_size=3),
    }
)
rows = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.just(1), "components": st.lists(text_input, max_size=2)}),
        st.fixed_dictionaries({"type": st.just(18), "id": st.integers(1, 9), "component": select}),
        st.fixed_dictionaries({"type": st.just(18), "id": st.integers(1, 9), "component": text_input}),
    ),
    max_size=5,
)
COMMANDS = ["ask", "prompt", "tools", "reset", "approvals", "help", "connections", "connect", "nope"]
OPTIONS = ["question", "name", "arguments", "revoke", "server", "x"]
# The options that offer choices as one types: Discord sends autocomplete for these only (for any
# other, discord.py itself logs the error: it happens only while Discord's command list is stale).
AUTOCOMPLETED = [("prompt", "name"), ("prompt", "arguments"), ("approvals", "revoke"), ("connect", "server")]
PLACES = ["channel", "dm", "unknown"]
AUTHORS = ["person", "person", "bot", "itself"]
deliveries = st.one_of(
    st.fixed_dictionaries(
        {
            "kind": st.just("message"),
            "where": st.sampled_from(PLACES),
            "author": st.sampled_from(AUTHORS),
            "content": texts,
            "mention": st.booleans(),
            "type": st.sampled_from([0, 0, 19, 6, 7, 18, 20, 21, 23, 46, 255]),
            "flags": st.integers(0, 2**16),
            "reference": st.one_of(st.none(), snowflakes),
        }
    ),
    st.fixed_dictionaries(
        {
            "kind": st.just("slash"),
            "where": st.sampled_from(["channel", "dm"]),
            "name": st.sampled_from(COMMANDS),
            "options": st.dictionaries(st.sampled_from(OPTIONS), texts, max_size=3),
        }
    ),
    st.fixed_dictionaries(
        {"kind": st.just("click"), "where": st.sampled_from(["channel", "dm"]), "custom_id": custom_ids}
    ),
    st.fixed_dictionaries(
        {
            "kind": st.just("modal"),
            "where": st.sampled_from(["channel", "dm"]),
            "custom_id": modal_ids,
            "rows": rows,
        }
    ),
    st.builds(
        lambda where, named, typed: {
            "kind": "autocomplete",
            "where": where,
            "name": named[0],
            "option": named[1],
            "typed": typed,
        },
        st.sampled_from(["channel", "dm"]),
        st.sampled_from(AUTOCOMPLETED),
        texts,
    ),
)


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Discord:
    fake: FakeDiscord
    llm: FakeLLMServer
    person: FakeUser
    other_bot: FakeUser
    logs: Collected
    tried: dict[str, int] = field(default_factory=dict)


@pytest.fixture(scope="module")
def logs() -> Iterator[Collected]:
    handler = Collected()
    logging.getLogger().addHandler(handler)
    try:
        yield handler
    finally:
        logging.getLogger().removeHandler(handler)


@pytest.fixture(scope="module")
async def discord_bot(tmp_path_factory: pytest.TempPathFactory, logs: Collected) -> AsyncIterator[Discord]:
    tmp = tmp_path_factory.mktemp("discord-fuzz")
    server = ServerConfig(
        trustAnnotations=True,
        command=sys.executable,
        args=["-m", "tests.mcp_servers.recorder", str(tmp / "calls.log")],
        cwd=str(ROOT),
    )
    store = await SQLiteStore.open(tmp / "nerve.db")
    try:
        async with (
            FakeDiscord() as fake,
            FakeLLMServer(lambda request: reply("ok"), strict=False) as llm,
            MCPHost({"recorder": server}) as host,
            approving_agent(llm, store, host) as agent,
            running_bot(fake, agent),
        ):
            yield Discord(fake, llm, fake.user("ada"), fake.user("robot", bot=True), logs)
    finally:
        await store.close()


def channel_of(d: Discord, where: str, user: FakeUser) -> int:
    if where == "dm":
        return d.fake._channel_for_dm(user)
    if where == "unknown":
        return d.fake.snowflake()
    return d.fake.channel_id


async def deliver(d: Discord, case: dict[str, Any]) -> None:
    fake, person = d.fake, d.person
    kind = case["kind"]
    if kind == "message":
        author = {"person": person, "bot": d.other_bot, "itself": fake.bot}[case["author"]]
        channel = channel_of(d, case["where"], author)
        content = f"<@{fake.bot.id}> {case['content']}" if case["mention"] else case["content"]
        extra: dict[str, Any] = {"type": case["type"], "flags": case["flags"]}
        if case["reference"] is not None:
            extra["message_reference"] = {"message_id": case["reference"], "channel_id": str(channel)}
        msg = fake._message(
            channel_id=channel,
            author=author,
            content=content,
            mentions=[fake.bot] if case["mention"] else [],
            extra=extra,
        )
        fake.messages[int(msg["id"])] = msg
        await fake.dispatch("MESSAGE_CREATE", msg)
    elif kind == "slash":
        channel = fake.channel_id if case["where"] == "channel" else None
        await fake.slash(person, case["name"], case["options"], channel_id=channel)
    elif kind == "autocomplete":
        channel = fake.channel_id if case["where"] == "channel" else None
        await fake.autocomplete(person, case["name"], case["option"], case["typed"], channel_id=channel)
    elif kind == "click":
        channel = channel_of(d, case["where"], person)
        on = fake._message(channel_id=channel, author=fake.bot, content="an earlier answer")
        await fake.click(person, on, case["custom_id"])
    else:
        channel = channel_of(d, case["where"], person)
        data = fake._interaction_base(person, channel if case["where"] == "channel" else None, 5)
        data["data"] = {"custom_id": case["custom_id"], "components": case["rows"]}
        await fake.dispatch("INTERACTION_CREATE", data)
    d.tried[kind] = d.tried.get(kind, 0) + 1


@FUZZ
@given(case=deliveries)
async def test_no_discord_delivery_crashes_a_handler(discord_bot: Discord, case: dict[str, Any]) -> None:
    before = len(discord_bot.logs.records)
    await deliver(discord_bot, case)
    # Gateway events are handled as they arrive; a short pause keeps the fuzz from only queueing.
    await asyncio.sleep(0.002)
    raised = [r for r in discord_bot.logs.records[before:] if r.exc_info or r.levelno >= logging.ERROR]
    assert raised == [], f"{case}: {[r.getMessage() for r in raised]}"


async def quiet(fake: FakeDiscord, within: float) -> None:
    """Wait until the bot has sent nothing for half a second (bounded)."""
    async with asyncio.timeout(within):
        while True:
            seen = len(fake.requests)
            await asyncio.sleep(0.5)
            if len(fake.requests) == seen:
                return


async def test_after_the_fuzz_nothing_raised_few_lines_were_logged_and_the_bot_still_answers(
    discord_bot: Discord,
) -> None:
    d = discord_bot
    if not d.tried:
        pytest.skip("run together with the fuzz test above")
    await quiet(d.fake, within=60)
    cases = sum(d.tried.values())
    assert cases >= CASES
    raised = [r for r in d.logs.records if r.exc_info or r.levelno >= logging.ERROR]
    assert raised == [], [r.getMessage() for r in raised[:5]]
    warnings = [r.getMessage() for r in d.logs.records]
    assert len(warnings) <= cases, f"{len(warnings)} warnings for {cases} deliveries: {warnings[:10]}"
    assert d.fake.connected
    asked = len(d.llm.requests)
    await d.fake.user_dms(d.person, "are you still there?")
    await d.fake.wait_until(lambda: len(d.llm.requests) > asked, within=20)
    print(f"\nfigure: Discord deliveries: {cases} {d.tried}, {len(warnings)} warning lines, {asked} turns")
