"""Turning the tools each server lists into the specs offered to the model (S2, S3, S12, S15).

Pure: given every server's latest listing and its config, the catalog is always rebuilt whole, so
a name never depends on the order in which servers happened to come up.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bot.mcp.naming import Collision, unique_names
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.policy.approval import ToolHints, definition_hash
from bot.types import ToolSpec

logger = logging.getLogger(__name__)

# Names outside OpenAI's rule for function names (other providers accept a subset of it).
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]+")
MAX_NAME = 64
PREFIX_SEPARATOR = "__"

# JSON Schema keywords whose values are schemas, lists of schemas, or maps of name → schema.
_SCHEMA_KEYS = frozenset(
    {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"}
    | {"unevaluatedItems", "unevaluatedProperties", "additionalItems"}
)
_SCHEMA_LIST_KEYS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_MAP_KEYS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedTool:
    """One tool as a server listed it, reduced to what the catalog needs."""

    name: str
    description: str | None
    input_schema: dict[str, Any]
    # The server's tool annotations in their wire form (`readOnlyHint`, …); None when it sent none.
    annotations: dict[str, Any] | None = None


def sanitize_name(raw: str) -> str:
    """A name that fits `^[a-zA-Z0-9_-]{1,64}$`; long names keep a hash so they stay distinct."""
    name = _INVALID_CHARS.sub("_", raw).strip("_") or "tool"
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(raw.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    return name


def clean_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema without generated `title`s (tokens the model does not need), rooted at an object.

    Only schema positions are touched: a property that happens to be called "title" stays.
    """
    cleaned = _strip_titles(schema)
    cleaned.setdefault("type", "object")
    if cleaned["type"] == "object":
        cleaned.setdefault("properties", {})
    return cleaned


def _strip_titles(schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_KEYS and isinstance(value, Mapping):
            out[key] = _strip_titles(value)
        elif key in _SCHEMA_LIST_KEYS | {"items"} and isinstance(value, list):
            out[key] = [_strip_titles(v) if isinstance(v, Mapping) else v for v in value]
        elif key in _SCHEMA_MAP_KEYS and isinstance(value, Mapping):
            out[key] = {k: _strip_titles(v) if isinstance(v, Mapping) else v for k, v in value.items()}
        else:
            out[key] = value
    return out


def build_catalog(
    listings: Mapping[str, Sequence[ListedTool]],
    servers: Mapping[str, ServerConfig],
    *,
    default_timeout: float,
) -> tuple[dict[str, ToolSpec], list[Collision]]:
    """Every enabled tool under the name the model will use, in config order, and the collisions.

    A name is kept as the server wrote it (sanitised only if a provider would reject it) unless it
    collides with another tool's: then every party is offered as `<server>__<tool>`
    (`bot.mcp.naming`). Each spec carries its approval mode (the tool's setting, else the
    server's), the server's annotations and whether the operator trusts them, and the hash of the
    definition as the server gave it, before any override of ours.
    """
    enabled: list[tuple[str, ListedTool, ToolOverride]] = []
    for server, config in servers.items():
        for tool in listings.get(server, ()):
            override = config.tools.get(tool.name, ToolOverride())
            if override.enabled:
                enabled.append((server, tool, override))
    names, collisions = unique_names(
        [(server, tool.name) for server, tool, _ in enabled], clean=sanitize_name, separator=PREFIX_SEPARATOR
    )

    catalog: dict[str, ToolSpec] = {}
    for server, tool, override in enabled:
        name = names[(server, tool.name)]
        if name != tool.name:
            logger.info("tool %r of server %r is offered as %r", tool.name, server, name)
        config = servers[server]
        catalog[name] = ToolSpec(
            name=name,
            description=override.description
            or tool.description
            or f"Tool {tool.name} of the {server} server.",
            parameters=clean_schema(tool.input_schema),
            server=server,
            original_name=tool.name,
            timeout=override.timeout or config.timeout or default_timeout,
            triggers=tuple(override.triggers),
            approval=override.approval or config.approval,
            hints=ToolHints.from_annotations(tool.annotations),
            trusted_hints=config.trust_annotations,
            definition_hash=definition_hash(
                tool.name, tool.description or "", tool.input_schema, tool.annotations
            ),
        )
    return catalog, collisions


def unmatched_overrides(
    listings: Mapping[str, Sequence[ListedTool]], servers: Mapping[str, ServerConfig]
) -> list[str]:
    """Overrides naming a tool the (listed) server does not have: usually a typo in the servers file."""
    problems = []
    for server, config in servers.items():
        if server not in listings:
            continue
        listed = {tool.name for tool in listings[server]}
        for name in config.tools:
            if name not in listed:
                problems.append(f"server '{server}' has settings for tool '{name}', which it does not list")
    return problems
