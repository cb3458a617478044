"""Approval modes, hashes and scopes per place: pure rules, checked case by case."""

from __future__ import annotations

import pytest

from bot.policy.approval import ToolHints, call_hash, definition_hash, needs_approval
from bot.policy.scopes import Place, Rule, Scopes

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
    assert needs_approval(mode, hints) is expected


def test_a_tool_claiming_read_only_and_destructive_at_once_still_asks():
    hints = ToolHints.from_annotations({"readOnlyHint": True, "destructiveHint": True})
    assert needs_approval("writes", hints) is True


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
