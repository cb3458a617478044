"""Which servers and tools a place may use.

A place is where a message was written: a Slack channel or DM, a Discord guild, channel or DM, the
terminal; and who wrote it. Rules are allow and deny lists of `server` or `server/tool` patterns
with `*` wildcards. The most specific rule set that exists for the place decides (user, then
channel, then guild, then the DM or platform default, then the global default); within it, deny
wins over allow. With no policy at all, everything is allowed, as before policies existed.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """Where a turn happens, in the terms the policy names places by."""

    platform: str
    channel: str | None = None
    guild: str | None = None
    dm: bool = False
    user: str | None = None

    def rule_names(self) -> list[str]:
        """Policy keys that may apply here, most specific first."""
        names: list[str] = []
        if self.user:
            names.append(f"{self.platform}:user:{self.user}")
        if self.channel and not self.dm:
            names.append(f"{self.platform}:{self.channel}")
        if self.guild:
            names.append(f"{self.platform}:guild:{self.guild}")
        if self.dm:
            names.append(f"{self.platform}:dm")
        names.append(self.platform)
        names.append("*")
        return names


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """Allow and deny patterns; an empty allow list allows everything not denied."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Scopes:
    """Rules by place name (see `Place.rule_names`)."""

    rules: Mapping[str, Rule] = field(default_factory=dict)

    def rule_for(self, place: Place) -> tuple[str, Rule] | None:
        """The most specific rule set that exists for the place, with its name."""
        for name in place.rule_names():
            rule = self.rules.get(name)
            if rule is not None:
                return name, rule
        return None

    def allows(self, place: Place, server: str, tool: str) -> bool:
        """Whether this place may call `server`'s `tool`."""
        found = self.rule_for(place)
        if found is None:
            return True
        _, rule = found
        if _any_match(rule.deny, server, tool):
            return False
        return not rule.allow or _any_match(rule.allow, server, tool)

    def filter(self, place: Place, tools: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """The (server, tool) pairs this place may call, in the given order."""
        return [(server, tool) for server, tool in tools if self.allows(place, server, tool)]


def _any_match(patterns: Sequence[str], server: str, tool: str) -> bool:
    return any(_matches(pattern, server, tool) for pattern in patterns)


def _matches(pattern: str, server: str, tool: str) -> bool:
    """`server` alone covers every tool of the server; `server/tool` one tool; `*` works in either part."""
    server_pattern, _, tool_pattern = pattern.partition("/")
    if not fnmatch.fnmatchcase(server, server_pattern):
        return False
    return not tool_pattern or fnmatch.fnmatchcase(tool, tool_pattern)
