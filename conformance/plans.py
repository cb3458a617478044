"""What nerve calls in each client scenario: the calls a model would make, in rounds.

A scenario's test server offers tools and judges the requests it receives. By default nerve calls
every tool it offers, all in one round (as one model message with several calls, run at once),
with arguments read from each tool's schema. The suite hands some scenarios the exact calls to make
(`toolCalls` in its context); a few need particular arguments, listed here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.types import ToolSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One tool call as a model would write it; `may_fail` when the test server cannot run it."""

    tool: str
    arguments: dict[str, Any]
    may_fail: bool = False


Round = tuple[Call, ...]

# The JSON Schema 2020-12 scenario: the focal tool's schema, as nerve holds it, echoed back.
_FOCAL_TOOL = "json_schema_2020_12_tool"
_ECHO_TOOL = "json_schema_echo"


def plan(scenario: str, context: Mapping[str, Any], tools: Sequence[ToolSpec]) -> list[Round]:
    """The rounds of calls to make in `scenario`, given the suite's context and the tools offered."""
    given = context.get("toolCalls")
    if isinstance(given, list):
        # The suite's own calls, one after the other, arguments exactly as given (nulls included).
        return [
            (Call(tool=str(call["name"]), arguments=dict(call.get("arguments") or {})),) for call in given
        ]
    by_name = {tool.name: tool for tool in tools}
    if scenario == "tools_call":
        return [(Call(tool="add_numbers", arguments={"a": 2, "b": 3}),)]
    if scenario == "json-schema-2020-12-preservation" and _FOCAL_TOOL in by_name:
        schema = by_name[_FOCAL_TOOL].parameters
        return [(Call(tool=_ECHO_TOOL, arguments={"schema": schema}),)]
    if scenario == "json-schema-ref-no-deref":
        # The test server only lists tools. The call still passes nerve's argument checks first,
        # and `profile` is the argument whose schema is a `$ref` to a URL nerve must not fetch.
        arguments = {"id": "ada-lovelace", "profile": {"displayName": "Ada"}}
        return [(Call(tool="lookup_user", arguments=arguments, may_fail=True),)]
    return [tuple(Call(tool=tool.name, arguments=sample_arguments(tool.parameters)) for tool in tools)]


def sample_arguments(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments for a tool's required parameters: its default, first allowed value, or a plain one."""
    properties = schema.get("properties") or {}
    required = schema.get("required") or ()
    return {name: _sample(properties.get(name) or {}) for name in required}


def _sample(prop: Mapping[str, Any]) -> Any:
    for key in ("default", "const"):
        if key in prop:
            return prop[key]
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    kind = prop.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    samples: dict[Any, Any] = {
        "string": "example",
        "integer": 1,
        "number": 1.5,
        "boolean": True,
        "object": {},
        "array": [],
    }
    return samples.get(kind, "example")
