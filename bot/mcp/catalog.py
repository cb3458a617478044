"""What servers offer, as nerve offers it: tools to the model (S2, S3, S12, S15), prompts to people.

Names never collide by file order: a hostile server could list `send_email_` next to a real
`send_email`, so every party to a collision is prefixed with its server."""

from __future__ import annotations

import hashlib
import logging
import re
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types

from bot.mcp.results import describe_block
from bot.mcp.server_config import ServerConfig, ToolOverride
from bot.policy.approval import ToolHints, definition_hash
from bot.types import PromptArgument, PromptSpec, ToolSpec

if TYPE_CHECKING:
    from mcp import Client

logger = logging.getLogger(__name__)

# (server, the name the server gave it)
Entry = tuple[str, str]
# Rounds of prefixing before a hash settles what is left: names collide again only in contrived cases.
_ROUNDS = 4


@dataclass(frozen=True, slots=True)
class Collision:
    """Entries of different servers whose names would have been taken for one another."""

    wanted: str
    parties: tuple[tuple[Entry, str], ...]  # each entry with the name it is offered under now

    def describe(self, kind: str) -> str:
        """One line for an operator: who wanted the name and what each got instead."""
        parts = ", ".join(
            f"{name!r} of server {server!r} as {final!r}" for (server, name), final in self.parties
        )
        return f"{kind} names collide on {self.wanted!r}: offered {parts}"


def collision_key(name: str) -> str:
    """What two names share when people or models would take one for the other."""
    return re.sub(r"[-_]+", "_", name.casefold()).strip("_")


def unique_names(
    entries: Sequence[Entry], *, clean: Callable[[str], str], separator: str
) -> tuple[dict[Entry, str], list[Collision]]:
    """The offered name of each entry, and the collisions: each party is prefixed with its server,
    and what still collides (a prefix spelling another server's) gets a short hash."""
    names = {entry: clean(entry[1]) for entry in entries}
    prefixed: set[Entry] = set()
    collisions: dict[str, list[Entry]] = {}
    for _ in range(_ROUNDS):
        if not (clashes := _clashes(names)):
            break
        for group in clashes:
            wanted = names[group[0]]
            for entry in group:
                if entry in prefixed:
                    names[entry] = _hashed(names[entry], entry, clean)
                else:
                    prefixed.add(entry)
                    names[entry] = clean(f"{entry[0]}{separator}{entry[1]}")
            collisions.setdefault(collision_key(wanted), []).extend(group)
    for group in _clashes(names):  # contrived names still clashing: a hash each, which cannot collide
        for entry in group:
            names[entry] = _hashed(names[entry], entry, clean)
    found = [
        Collision(wanted=key, parties=tuple((entry, names[entry]) for entry in sorted(set(group))))
        for key, group in sorted(collisions.items())
    ]
    return names, found


def _clashes(names: dict[Entry, str]) -> list[list[Entry]]:
    """Groups of entries of which some collide, each group sorted (so the result is order-free)."""
    by_key: dict[str, list[Entry]] = defaultdict(list)
    for entry, name in names.items():
        by_key[collision_key(name)].append(entry)
    return [sorted(group) for _, group in sorted(by_key.items()) if len(group) > 1]


def _hashed(name: str, entry: Entry, clean: Callable[[str], str]) -> str:
    digest = hashlib.sha1(f"{entry[0]}\0{entry[1]}".encode()).hexdigest()[:6]
    return clean(f"{name[:50]}_{digest}")


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
    """The input schema rooted at an object, without generated `title`s (a property "title" stays)."""
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
    """Every enabled tool under the name the model will use, in config order, and the collisions."""
    enabled = [
        (server, tool, override, config)
        for server, config in servers.items()
        for tool in listings.get(server, ())
        if (override := config.tools.get(tool.name, ToolOverride())).enabled
    ]
    names, collisions = unique_names(
        [(server, tool.name) for server, tool, *_ in enabled], clean=sanitize_name, separator=PREFIX_SEPARATOR
    )

    catalog: dict[str, ToolSpec] = {}
    for server, tool, override, config in enabled:
        name = names[(server, tool.name)]
        if name != tool.name:
            logger.info("tool %r of server %r is offered as %r", tool.name, server, name)
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
    return [
        f"server '{server}' has settings for tool '{name}', which it does not list"
        for server, config in servers.items()
        if server in listings
        for name in config.tools
        if name not in {tool.name for tool in listings[server]}
    ]


def prompt_specs(
    listings: Mapping[str, Sequence[mcp_types.Prompt]],
) -> tuple[dict[str, PromptSpec], list[Collision]]:
    """Every server's prompts under names unique by the same rule as tools, and the collisions."""
    entries = [(server, prompt.name) for server, prompts in listings.items() for prompt in prompts]
    names, collisions = unique_names(entries, clean=str, separator="_")
    specs: dict[str, PromptSpec] = {}
    for server, prompts in listings.items():
        for prompt in prompts:
            name = names[(server, prompt.name)]
            specs[name] = PromptSpec(
                name=name,
                server=server,
                original_name=prompt.name,
                title=prompt.title or prompt.name,
                description=prompt.description or "",
                arguments=tuple(
                    PromptArgument(name=a.name, description=a.description or "", required=bool(a.required))
                    for a in prompt.arguments or ()
                ),
            )
    return specs, collisions


def prompt_text(result: mcp_types.GetPromptResult) -> str:
    """The prompt's messages as one question: people's parts as written, the assistant's labelled."""
    parts = []
    for message in result.messages:
        text = describe_block(message.content)
        parts.append(text if message.role == "user" else f"(assistant) {text}")
    return "\n\n".join(part for part in parts if part.strip())


# A server that keeps handing out cursors stops being listed after this many pages.
MAX_TOOL_PAGES = 100


async def list_all_tools(client: Client) -> tuple[ListedTool, ...]:
    """Every tool, following pagination cursors (bounded, so a server that loops cannot hang us)."""
    tools = [t async for page in _pages(client.list_tools) for t in page.tools]
    return tuple(
        ListedTool(
            name=t.name,
            description=t.description,
            input_schema=t.input_schema,
            annotations=None
            if t.annotations is None
            else t.annotations.model_dump(mode="json", by_alias=True, exclude_none=True),
        )
        for t in tools
    )


async def list_all_prompts(client: Client) -> tuple[mcp_types.Prompt, ...]:
    """Every prompt, following cursors (bounded); none when the server offers no prompts."""
    if client.server_capabilities.prompts is None:
        return ()
    return tuple([prompt async for page in _pages(client.list_prompts) for prompt in page.prompts])


async def _pages(list_page: Callable[..., Awaitable[Any]]) -> AsyncIterator[Any]:
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        page = await list_page(cursor=cursor)
        yield page
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            break
        seen.add(cursor)
