"""Approval modes, hashes and scopes per place: pure rules, checked case by case."""

from __future__ import annotations

import re

import pytest

from adapters.settings import PLATFORMS
from bot.policy.approval import ToolHints, call_hash, definition_hash, needs_approval
from bot.policy.scopes import Place, Rule, Scopes, pattern_problem, rule_name_problem
from bot.types import ToolSpec

READ_ONLY = ToolHints.from_annotations({"readOnlyHint": True})
DESTRUCTIVE = ToolHints.from_annotations({"readOnlyHint": False, "destructiveHint": True})
UNSAID = ToolHints.from_annotations(None)


@pytest.mark.parametrize(
    ("mode", "hints", "expected"),
    [
        ("writes", READ_ONLY, False),
        ("writes", UNSAID, True),
        ("writes", DESTRUCTIVE, True),
        ("writes", ToolHints.from_annotations({"openWorldHint": True}), True),
        ("always", READ_ONLY, True),
        ("never", DESTRUCTIVE, False),
    ],
)
def test_writes_runs_only_read_only_tools_at_once_and_always_cannot_be_talked_down(mode, hints, expected):
    assert needs_approval(mode, hints, trusted=True) is expected


@pytest.mark.parametrize("hints", [READ_ONLY, UNSAID, DESTRUCTIVE])
def test_a_server_not_trusted_cannot_talk_its_way_out_of_approval_under_writes(hints):
    assert needs_approval("writes", hints, trusted=False) is True
    assert needs_approval("always", hints, trusted=False) is True
    assert needs_approval("never", hints, trusted=False) is False  # the operator's explicit choice


def test_a_tool_claiming_read_only_and_destructive_at_once_still_asks():
    hints = ToolHints.from_annotations({"readOnlyHint": True, "destructiveHint": True})
    assert needs_approval("writes", hints, trusted=True) is True


def test_annotations_that_are_not_booleans_count_as_unsaid():
    assert ToolHints.from_annotations({"readOnlyHint": "true"}) == UNSAID


def test_the_call_hash_changes_with_any_argument_and_ignores_key_order():
    first = call_hash("fs", "write_file", {"path": "a.txt", "content": "x"})
    assert first == call_hash("fs", "write_file", {"content": "x", "path": "a.txt"})
    assert first != call_hash("fs", "write_file", {"path": "a.txt", "content": "y"})
    assert first != call_hash("other", "write_file", {"path": "a.txt", "content": "x"})


def test_the_definition_hash_changes_when_the_description_schema_or_annotations_change():
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    hints = {"destructiveHint": True}
    base = definition_hash("write_file", "Write a file", schema, hints)
    assert base != definition_hash("write_file", "Write a file!", schema, hints)
    assert base != definition_hash("write_file", "Write a file", {"type": "object"}, hints)
    assert base != definition_hash("write_file", "Write a file", schema, {"destructiveHint": False})


SCOPES = Scopes(
    rules={
        "*": Rule(allow=("env-query", "geo-simulator")),
        "slack:C1": Rule(allow=("fs",), deny=("fs/write_*", "fs/move_file")),
        "slack:dm": Rule(allow=("*",)),
        "discord:guild:G1": Rule(deny=("fs",)),
        "slack:user:U9": Rule(deny=("*",)),
    }
)


def test_the_most_specific_place_wins_and_deny_wins_within_it():
    channel = Place(platform="slack", channel="C1", user="U1")
    assert SCOPES.allows(channel, "fs", "read_file")
    assert not SCOPES.allows(channel, "fs", "write_file")
    assert not SCOPES.allows(channel, "fs", "move_file")
    # The channel's allow list replaces the default one: the seed servers are not listed there.
    assert not SCOPES.allows(channel, "env-query", "get_environment_status")


def test_a_user_rule_beats_the_channel_rule():
    assert not SCOPES.allows(Place(platform="slack", channel="C1", user="U9"), "fs", "read_file")


def test_dms_guilds_and_the_default_apply_where_nothing_more_specific_exists():
    assert SCOPES.allows(Place(platform="slack", channel="D1", dm=True, user="U1"), "fs", "write_file")
    in_guild = Place(platform="discord", channel="C5", guild="G1", user="U1")
    assert not SCOPES.allows(in_guild, "fs", "read_file")
    assert SCOPES.allows(in_guild, "env-query", "get_environment_status")
    elsewhere = Place(platform="slack", channel="C2", user="U1")
    assert SCOPES.allows(elsewhere, "geo-simulator", "simulate_geolocation")
    assert not SCOPES.allows(elsewhere, "fs", "read_file")


def test_no_policy_allows_everything():
    assert Scopes().allows(Place(platform="terminal"), "anything", "at_all")


# --- places written as text ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ("terminal", Place(platform="terminal")),
        ("slack:C123", Place(platform="slack", channel="C123")),
        ("slack:channel:C123", Place(platform="slack", channel="C123")),
        ("slack:dm", Place(platform="slack", dm=True)),
        ("slack:C123:user:U1", Place(platform="slack", channel="C123", user="U1")),
        ("slack:user:U1:C123", Place(platform="slack", channel="C123", user="U1")),
        ("discord:guild:G1:C5", Place(platform="discord", guild="G1", channel="C5")),
        ("discord:dm:user:987654321", Place(platform="discord", dm=True, user="987654321")),
        ("terminal:user:ada", Place(platform="terminal", user="ada")),
    ],
)
def test_a_place_is_read_from_its_platform_and_parts_in_any_order(text, place):
    assert Place.parse(text, PLATFORMS) == place


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("slak:C123", "must start with one of slack, discord, terminal"),
        ("slack:#general", "use the channel id"),
        ("slack:guild:T1", "only Discord has guilds"),
        ("slack:user", "'user' needs an id after it"),
        ("slack:C1:C2", "names a channel twice"),
        ("terminal:C1", "the terminal has no channels"),
        ("discord:dm:guild:G1", "a DM is not in a guild"),
    ],
)
def test_a_place_that_cannot_be_read_says_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        Place.parse(text, PLATFORMS)


def test_every_rule_name_a_place_can_have_is_accepted_as_a_policy_key():
    places = [
        Place(platform="slack", channel="C123", user="U1"),
        Place(platform="discord", channel="C5", guild="G1", user="U1"),
        Place(platform="discord", dm=True, user="U1"),
        Place(platform="slack", dm=True),
        Place(platform="terminal"),
    ]
    for place in places:
        for name in place.rule_names():
            assert rule_name_problem(name, PLATFORMS) is None, name


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("slack:C1:user:U1", "names more than one thing"),
        ("slack:channel:C1", "write place 'slack:channel:C1' as 'slack:C1'"),
        ("teams", "must start with one of"),
    ],
)
def test_a_policy_key_that_is_no_single_place_is_refused(name, says):
    assert says in (rule_name_problem(name, PLATFORMS) or "")


@pytest.mark.parametrize(
    "pattern", ["fs", "fs/read_*", "*", "*/delete_*", "env-query/get_environment_status"]
)
def test_server_and_server_slash_tool_patterns_are_accepted(pattern):
    assert pattern_problem(pattern) is None


@pytest.mark.parametrize("pattern", ["", "/read", "fs/", "fs/a/b", "fs /read"])
def test_malformed_patterns_are_refused(pattern):
    assert pattern_problem(pattern) is not None


def test_a_place_is_offered_only_the_tools_it_may_call_judged_by_their_original_names():
    def spec(server: str, original: str, name: str) -> ToolSpec:
        return ToolSpec(name=name, description="", parameters={}, server=server, original_name=original)

    tools = [
        spec("fs", "read_file", "read_file"),
        spec("fs", "write_file", "fs__write_file"),
        spec("env-query", "get_environment_status", "get_environment_status"),
    ]

    offered = SCOPES.offered(Place(platform="slack", channel="C1"), tools)

    assert [t.name for t in offered] == ["read_file"]
    assert SCOPES.offered(Place(platform="slack", dm=True), tools) == tools
