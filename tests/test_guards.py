"""Argument checks (S13), the loop guard (S7) and the confirm-nudge triggers (S12)."""

from __future__ import annotations

from bot.turn.guards import LoopGuard, parse_arguments, triggered_tools
from bot.types import ToolSpec

GEO = ToolSpec(
    name="simulate_geolocation",
    description="where coordinates are",
    server="geo",
    original_name="simulate_geolocation",
    triggers=("near", "nearby"),
    parameters={
        "type": "object",
        "properties": {
            "lat": {"type": "number", "minimum": -90, "maximum": 90},
            "lng": {"type": "number", "minimum": -180, "maximum": 180},
            "radius": {"type": "integer", "minimum": 10, "maximum": 5000, "default": 100},
            "unit": {"type": "string", "enum": ["m", "km"]},
            "exact": {"type": "boolean"},
        },
        "required": ["lat", "lng"],
        "additionalProperties": False,
    },
)


def test_valid_arguments_pass_unchanged():
    parsed = parse_arguments('{"lat": 31.23, "lng": 121.47}', GEO)
    assert parsed.value == {"lat": 31.23, "lng": 121.47} and parsed.problem is None


def test_numbers_and_booleans_in_strings_are_coerced_safely():
    parsed = parse_arguments('{"lat": "12.5", "lng": "-3", "radius": "300", "exact": "true"}', GEO)
    assert parsed.value == {"lat": 12.5, "lng": -3.0, "radius": 300, "exact": True}


def test_a_whole_float_becomes_an_integer_but_a_fraction_does_not():
    assert parse_arguments('{"lat": 1, "lng": 2, "radius": 300.0}', GEO).value == {
        "lat": 1,
        "lng": 2,
        "radius": 300,
    }
    parsed = parse_arguments('{"lat": 1, "lng": 2, "radius": 300.5}', GEO)
    assert parsed.value is None and "radius" in (parsed.problem or "")


def test_out_of_bounds_values_are_refused_with_the_field_named():
    parsed = parse_arguments('{"lat": 999, "lng": 121.47}', GEO)
    assert parsed.value is None
    assert "lat: 999 is greater than the maximum of 90" in (parsed.problem or "")
    assert "Call simulate_geolocation again" in (parsed.problem or "")


def test_missing_required_fields_unknown_fields_and_bad_enums_are_all_reported():
    parsed = parse_arguments('{"lat": 1, "color": "red", "unit": "miles"}', GEO)
    problem = parsed.problem or ""
    assert "'lng' is a required property" in problem
    assert "'color' was unexpected" in problem
    assert "'miles' is not one of ['m', 'km']" in problem


def test_invalid_json_is_refused_never_turned_into_an_empty_object():
    for raw in ('{"lat": 1, "lng": ', "lat=1", "[1, 2]", '"text"'):
        parsed = parse_arguments(raw, GEO)
        assert parsed.value is None, raw
    assert "not valid JSON" in (parse_arguments("{'lat': 1}", GEO).problem or "")


def test_empty_arguments_are_fine_only_when_nothing_is_required():
    assert parse_arguments("", GEO).value is None
    no_args = ToolSpec(
        name="ping", description="", parameters={"type": "object"}, server="s", original_name="ping"
    )
    assert parse_arguments("", no_args).value == {}


def test_a_broken_schema_does_not_block_the_tool():
    broken = ToolSpec(
        name="odd",
        description="",
        parameters={"type": "object", "properties": {"x": {"type": 5}}},
        server="s",
        original_name="odd",
    )
    assert parse_arguments('{"x": 1}', broken).value == {"x": 1}


def test_an_optional_argument_given_as_null_counts_as_not_given():
    parsed = parse_arguments('{"lat": 1, "lng": 2, "unit": null, "exact": null, "radius": null}', GEO)
    assert parsed.problem is None
    assert parsed.value == {"lat": 1, "lng": 2}, "the server never sees the nulls"


def test_a_required_argument_given_as_null_is_still_refused():
    parsed = parse_arguments('{"lat": null, "lng": 2}', GEO)
    assert parsed.value is None
    assert "lat: None is not of type 'number'" in (parsed.problem or "")


def test_null_is_kept_where_the_schema_allows_it():
    nullable = ToolSpec(
        name="search",
        description="",
        server="s",
        original_name="search",
        parameters={
            "type": "object",
            "$defs": {"maybe": {"type": ["string", "null"]}},
            "properties": {
                "query": {"type": "string"},
                "verbose": {"type": ["boolean", "null"]},
                "since": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "tag": {"$ref": "#/$defs/maybe"},
                "limit": {"type": "integer"},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    )
    parsed = parse_arguments(
        '{"query": "q", "verbose": null, "since": null, "tag": null, "limit": null}', nullable
    )
    assert parsed.value == {"query": "q", "verbose": None, "since": None, "tag": None}


def test_a_null_for_an_unknown_argument_is_still_reported():
    parsed = parse_arguments('{"lat": 1, "lng": 2, "color": null}', GEO)
    assert parsed.value is None and "'color' was unexpected" in (parsed.problem or "")


def test_the_loop_guard_allows_three_identical_calls_then_refuses():
    guard = LoopGuard()
    assert [guard.allow("t", {"a": 1, "b": 2}) for _ in range(3)] == [True, True, True]
    assert guard.allow("t", {"b": 2, "a": 1}) is False, "key order does not make a call different"
    assert guard.allow("t", {"a": 2}) is True
    assert guard.allow("other", {"a": 1, "b": 2}) is True


def test_triggers_match_whole_words_in_any_case():
    assert triggered_tools("Anything NEARBY worth seeing?", [GEO]) == ["simulate_geolocation"]
    assert triggered_tools("a nearly empty park", [GEO]) == []


def test_greetings_never_trigger_a_nudge():
    chatty = ToolSpec(
        name="t", description="", parameters={}, server="s", original_name="t", triggers=("hello", "thanks")
    )
    assert triggered_tools("hello!", [chatty]) == []
    assert triggered_tools("Thanks", [chatty]) == []


def test_nan_and_infinity_are_refused():
    for raw in ('{"lat": NaN, "lng": 1}', '{"lat": 1, "lng": Infinity}'):
        parsed = parse_arguments(raw, GEO)
        assert parsed.value is None and "not a valid JSON number" in (parsed.problem or ""), raw


def test_chinese_triggers_match_inside_a_sentence():
    weather = ToolSpec(
        name="get_environment_status",
        description="",
        parameters={},
        server="s",
        original_name="get_environment_status",
        triggers=("天气",),
    )
    assert triggered_tools("今天天气怎么样", [weather]) == ["get_environment_status"]


def test_a_ref_to_a_url_in_a_tool_schema_is_never_fetched_and_local_refs_still_check(monkeypatch):
    import urllib.request

    def no_fetch(*args: object, **kwargs: object) -> object:
        raise AssertionError("a tool's schema made nerve fetch a URL")

    monkeypatch.setattr(urllib.request, "urlopen", no_fetch)
    remote = {
        "type": "object",
        "properties": {"profile": {"$ref": "https://schemas.example.com/profile.json"}},
    }
    parsed = parse_arguments('{"profile": {"name": "x"}}', _spec_of(remote))
    assert parsed.value == {"profile": {"name": "x"}}, "left for the server to check"

    local = {
        "type": "object",
        "$defs": {"age": {"type": "integer"}},
        "properties": {"age": {"$ref": "#/$defs/age"}},
    }
    assert parse_arguments('{"age": "old"}', _spec_of(local)).value is None
    assert parse_arguments('{"age": 3}', _spec_of(local)).value == {"age": 3}


def _spec_of(parameters: dict) -> ToolSpec:
    return ToolSpec(name="lookup", description="", server="s", original_name="lookup", parameters=parameters)
