"""1,000 fuzzed Slack deliveries, validly signed: none crashes nerve; a bad one gets a 4xx or one line.

A signature proves a delivery came from Slack (or someone holding the signing secret), not that it
has the shape nerve and slack-bolt expect. The fuzz posts validly signed bodies to the real events
endpoint (`serve_http`, slack-bolt, nerve's listeners, the mock Slack Web API behind them, the local
model service): any JSON, Events API envelopes with fields of the wrong type, interaction payloads
(`payload=` forms) with nerve's own action and callback ids and garbage around them, slash
commands, bytes that are not JSON at all. What must hold for each one:

* the answer is never a 5xx (a 5xx makes Slack retry a delivery that will never succeed);
* it writes at most one log line at warning or above, and never a traceback.

Derandomized: the same cases on every run, so a failure reproduces.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.llm_server import reply
from tests.test_slack_harness import Rig, rig

CASES = 1000
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    derandomize=True,
    # Nothing is written to disk: the same cases run every time anyway.
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Field names Slack payloads (and slack-bolt's readers) use, so the fuzz hits them with wrong types.
KEYS = [
    "type", "event", "event_id", "team_id", "team", "enterprise", "enterprise_id", "authorizations",
    "user", "user_id", "channel", "channel_id", "view", "message", "previous_message", "item",
    "assistant_thread", "function_data", "response_url", "response_urls", "actions", "container",
    "trigger_id", "state", "callback_id", "private_metadata", "is_ext_shared_channel", "token",
    "challenge", "api_app_id", "is_enterprise_install", "ts", "thread_ts", "text", "subtype",
    "channel_type", "bot_id", "action_id", "value", "block_id", "command", "hash", "blocks", "files",
]  # fmt: skip
TYPES = [
    "event_callback", "url_verification", "block_actions", "view_submission", "view_closed",
    "shortcut", "message_action", "app_rate_limited", "block_suggestion", "interactive_message",
]  # fmt: skip
EVENT_TYPES = ["message", "app_mention", "assistant_thread_started", "assistant_thread_context_changed"]
NERVE_IDS = [
    "nerve_approval.approve.0", "nerve_approval.deny_all", "nerve_approval.always", "nerve_feedback",
    "nerve_input.open", "nerve_input.3", "nerve_input", "nerve_connect", "nerve_connect.notes",
    "nerve_disconnect",
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=6)), inner, max_size=4),
    ),
    max_leaves=12,
)


ids = st.sampled_from(["C0CHANNEL", "D0ALICE", "U0ALICE", "U0BOB", "UBOT0001", "T0000TEAM", "", "x"])
stamps = st.one_of(
    st.integers(1, 999_999).map(lambda n: f"1600000000.{n:06d}"),
    st.sampled_from(["1600000000.000100", "1.5", "", "not a ts"]),
)
# Replaced by a new event id for each delivery: Slack's retries are tested elsewhere.
FRESH = "EVENT-ID"
_fresh = itertools.count(1)
words = st.one_of(
    st.text(min_size=1, max_size=40),
    st.sampled_from(["<@UBOT0001> hi", "<@UBOT0001|nerve> reset", "reset", "&lt;&gt;&amp;", "<!here>"]),
)


# Well-formed deliveries of every kind nerve handles; `mutated` then breaks some of them.
def message_in(
    kind: str, channels: list[str], channel_type: str, text: st.SearchStrategy[str]
) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "type": st.just(kind),
            "channel": st.sampled_from(channels),
            "user": st.sampled_from(["U0ALICE", "U0BOB"]),
            "text": text,
            "ts": stamps,
            "channel_type": st.just(channel_type),
        },
        optional={
            "thread_ts": stamps,
            "subtype": st.sampled_from(["bot_message", "message_changed", "file_share", "thread_broadcast"]),
            "bot_id": ids,
            "team": ids,
            "files": st.lists(st.fixed_dictionaries({"id": ids, "name": words}), max_size=2),
        },
    )


messages = st.one_of(
    message_in("message", ["D0ALICE", "D0BOB"], "im", words),
    message_in("app_mention", ["C0CHANNEL"], "channel", words.map(lambda text: f"<@UBOT0001> {text}")),
    message_in("message", ["C0CHANNEL"], "channel", words),
)
assistant_events = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["assistant_thread_started", "assistant_thread_context_changed"]),
        "assistant_thread": st.fixed_dictionaries(
            {"user_id": ids, "channel_id": ids, "thread_ts": stamps, "context": st.just({})}
        ),
        "event_ts": stamps,
    }
)
envelopes = st.fixed_dictionaries(
    {
        "type": st.just("event_callback"),
        "event": st.one_of(messages, assistant_events),
        "event_id": st.just(FRESH),
        "team_id": ids,
    },
    optional={
        "api_app_id": ids,
        "authorizations": st.lists(st.fixed_dictionaries({"team_id": ids}), max_size=2),
    },
)
clicks = st.fixed_dictionaries(
    {
        "type": st.just("block_actions"),
        "user": st.fixed_dictionaries({"id": ids}),
        "actions": st.lists(
            st.fixed_dictionaries(
                {"action_id": st.sampled_from(NERVE_IDS), "value": st.one_of(words, values.map(json.dumps))},
                optional={"type": st.just("button"), "block_id": words},
            ),
            min_size=1,
            max_size=2,
        ),
    },
    optional={
        "container": st.fixed_dictionaries({"channel_id": ids, "message_ts": stamps}),
        "channel": st.fixed_dictionaries({"id": ids}),
        "message": st.fixed_dictionaries({"ts": stamps, "thread_ts": stamps}),
        "team": st.fixed_dictionaries({"id": ids}),
        "trigger_id": words,
    },
)
forms = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["view_submission", "view_closed"]),
        "user": st.fixed_dictionaries({"id": ids}),
        "view": st.fixed_dictionaries(
            {"callback_id": st.sampled_from(["nerve_input", "other"]), "type": st.just("modal"), "id": words},
            optional={
                "private_metadata": st.one_of(words, values.map(json.dumps)),
                "state": st.fixed_dictionaries({"values": values}),
            },
        ),
    },
    optional={"team": st.fixed_dictionaries({"id": ids}), "trigger_id": words},
)
commands = st.dictionaries(
    st.sampled_from(["command", "text", "user_id", "channel_id", "team_id", "trigger_id", "response_url"]),
    st.one_of(st.sampled_from(["/nerve", "help", "tools", "reset", "connections", "connect x"]), words),
    max_size=7,
)


def _places(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) inside a JSON value."""
    found: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found += [(value, key), *_places(item)]
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += [(value, index), *_places(item)]
    return found


@st.composite
def mutated(draw: st.DrawFn, bodies: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """A well-formed body with up to three fields replaced by anything, or removed."""
    body = draw(bodies)
    for _ in range(draw(st.integers(0, 3))):
        places = _places(body)
        if not places:
            break
        container, key = draw(st.sampled_from(places))
        if isinstance(container, dict) and draw(st.booleans()):
            del container[key]
        else:
            container[key] = draw(values)
    return body


JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


def as_form(body: dict[str, Any]) -> str:
    return urlencode({"payload": json.dumps(body)})


deliveries = st.one_of(
    st.tuples(st.just(JSON), mutated(envelopes).map(json.dumps)),
    st.tuples(st.just(JSON), mutated(envelopes).map(json.dumps)),
    st.tuples(st.just(JSON), mutated(envelopes).map(json.dumps)),
    st.tuples(st.just(FORM), mutated(clicks).map(as_form)),
    st.tuples(st.just(FORM), mutated(forms).map(as_form)),
    st.tuples(st.just(FORM), commands.map(urlencode)),
    st.tuples(st.just(JSON), st.sampled_from(TYPES).map(lambda kind: json.dumps({"type": kind}))),
    st.tuples(st.just(JSON), values.map(json.dumps)),
    st.tuples(st.just(FORM), values.map(lambda body: urlencode({"payload": json.dumps(body)}))),
    st.tuples(st.sampled_from([JSON, FORM, "text/plain"]), st.text(max_size=60)),
)


class Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def collected() -> Iterator[Collected]:
    handler = Collected()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


@pytest.fixture(scope="module")
async def slack(tmp_path_factory: pytest.TempPathFactory, collected: Collected) -> AsyncIterator[Rig]:
    async with rig(tmp_path_factory.mktemp("fuzz"), lambda request: reply("ok"), strict=False) as r:
        yield r


tried = dict.fromkeys(["cases", "refused_400", "unhandled_404", "other_4xx", "answered_2xx", "turns"], 0)
problems: list[str] = []


@FUZZ
@given(delivery=deliveries)
async def test_no_signed_delivery_crashes_nerve_and_a_bad_one_costs_at_most_one_log_line(
    slack: Rig, collected: Collected, delivery: tuple[str, str]
) -> None:
    content_type, raw = delivery
    raw = raw.replace(FRESH, f"Ev{next(_fresh):06d}")
    before, asked = len(collected.records), len(slack.llm.requests)
    status, _ = await slack.deliver_raw(raw, content_type)
    # What the delivery started runs to its end first, so every line below is this delivery's.
    await slack.settle(within=30)
    logged = [r for r in collected.records[before:] if r.levelno >= logging.WARNING]
    answered = len(slack.llm.requests) > asked
    tried["cases"] += 1
    tried["turns"] += answered
    kind = {400: "refused_400", 404: "unhandled_404"}.get(
        status, "other_4xx" if status >= 400 else "answered_2xx"
    )
    tried[kind] += 1
    where = f"{content_type} {raw[:300]!r}"
    assert status < 500, f"{status} for {where}"
    assert not any(r.exc_info for r in logged), f"a traceback for {where}: {logged[0].getMessage()}"
    if not answered:
        assert len(logged) <= 1, f"{len(logged)} log lines for {where}: {[r.getMessage() for r in logged]}"


async def test_the_fuzz_ran_and_what_it_started_finished_without_an_error(
    slack: Rig, collected: Collected
) -> None:
    if tried["cases"] == 0:
        pytest.skip("run together with the fuzz test above")
    await slack.settle(within=60)
    assert tried["cases"] >= CASES
    errors = [r for r in collected.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == [], [r.getMessage() for r in errors[:5]]
    assert tried["refused_400"] > 0 and tried["answered_2xx"] > 0
    print(f"\nfigure: Slack deliveries: {tried}, 0 crashes, 0 tracebacks")
