"""Which servers and tools a place may use.

Rules are allow and deny lists of `server` or `server/tool` patterns with `*` wildcards. The most
specific rule set for the place decides (user, channel, guild, DM or platform default, global
default); within it, deny wins. With no policy at all, everything is allowed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from bot.policy.platforms import Platforms

# Channel, guild and user ids as the platforms write them (C0123ABC, 1234567890, a login name).
_ID = re.compile(r"^[A-Za-z0-9_.@-]+$")


class _Offerable(Protocol):
    """What `Scopes.offered` reads of a tool (a ToolSpec has both)."""

    @property
    def server(self) -> str: ...

    @property
    def original_name(self) -> str: ...


_ToolT = TypeVar("_ToolT", bound=_Offerable)


def _any_match(patterns: Sequence[str], server: str, tool: str) -> bool:
    """`server` alone covers every tool of the server; `server/tool` one tool; `*` works in either part."""
    parts = (pattern.partition("/") for pattern in patterns)
    return any(
        fnmatch.fnmatchcase(server, s) and (not t or fnmatch.fnmatchcase(tool, t)) for s, _, t in parts
    )


def _who_has_guilds(platforms: Platforms, title: str) -> str:
    """Why a place on a platform without guilds cannot name one: the platforms that have them."""
    having = [platform.title for platform in platforms.known if platform.guilds]
    if not having:
        return f"{title} has no guilds"
    return f"only {' and '.join(having)} {'has' if len(having) == 1 else 'have'} guilds"


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """Where a turn happens, in the terms the policy names places by."""

    platform: str
    channel: str | None = None
    guild: str | None = None
    # The workspace (team) on a platform installed in many (`Platform.teams`).
    team: str | None = None
    dm: bool = False
    user: str | None = None

    @classmethod
    def parse(cls, text: str, platforms: Platforms) -> Place:
        """A place as `nerve tools --place` and the policy section write it: a platform's name, then in any
        order, separated by `:`, `dm`, `guild:<id>`, `team:<id>`, `user:<id>`, a channel id (bare or
        `channel:<id>`); e.g. `<platform>:guild:G1:C5`. Raises ValueError saying what to write."""
        platform, *parts = text.strip().split(":")
        known = platforms.get(platform)
        if known is None:
            names = ", ".join(entry.name for entry in platforms.known)
            expected = f"it must start with one of {names}" if names else "no platform is known here"
            raise ValueError(f"place {text!r} starts with {platform!r}; {expected}")
        found: dict[str, str] = {}
        dm = False
        words = iter(parts)
        for part in words:
            if part == "dm":
                if dm:
                    raise ValueError(f"place {text!r} says 'dm' twice")
                dm = True
                continue
            kind = part if part in ("guild", "team", "user", "channel") else "channel"
            value = next(words, None) if kind == part else part
            if value is None:
                raise ValueError(f"place {text!r}: '{part}' needs an id after it, as in '{part}:ID'")
            if kind in found:
                raise ValueError(f"place {text!r} names a {kind} twice")
            if not _ID.match(value):
                hint = " (use the channel id, like C0123ABC, not its name)" if value.startswith("#") else ""
                raise ValueError(f"place {text!r}: {value!r} is not a {kind} id{hint}")
            found[kind] = value
        if "guild" in found and not known.guilds:
            raise ValueError(f"place {text!r}: {_who_has_guilds(platforms, known.title)}")
        if "team" in found and not known.teams:
            raise ValueError(f"place {text!r}: {known.title} is not installed in workspaces (teams)")
        if not known.channels and (dm or "channel" in found):
            raise ValueError(
                f"place {text!r}: {known.title} has no channels or DMs; "
                f"use '{platform}' or '{platform}:user:NAME'"
            )
        if dm and "guild" in found:
            raise ValueError(f"place {text!r}: a DM is not in a guild")
        return cls(platform=platform, dm=dm, **found)

    def rule_names(self) -> list[str]:
        """Policy keys that may apply here, most specific first."""
        names = [
            f"{self.platform}:user:{self.user}" if self.user else "",
            f"{self.platform}:{self.channel}" if self.channel and not self.dm else "",
            f"{self.platform}:guild:{self.guild}" if self.guild else "",
            f"{self.platform}:team:{self.team}" if self.team else "",
            f"{self.platform}:dm" if self.dm else "",
            self.platform,
            "*",
        ]
        return [name for name in names if name]


def place_id(place: Place) -> str:
    """The place an "always allow here" is remembered for, written as `Place.parse` reads it."""
    if place.platform == "terminal":
        return "terminal"
    return f"{place.platform}:{place.channel or '-'}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """Allow and deny patterns; an empty allow list allows everything not denied."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    # Whether anyone in the place may save memories for everyone there, or only admins.
    members_remember: bool = True
    # The configured model the place's turns ask first (a name in the `models` list); None: the primary.
    model: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Scopes:
    """Rules by place name (see `Place.rule_names`)."""

    rules: Mapping[str, Rule] = field(default_factory=dict)

    def rule_for(self, place: Place) -> tuple[str, Rule] | None:
        """The most specific rule set that exists for the place, with its name."""
        return next(((name, self.rules[name]) for name in place.rule_names() if name in self.rules), None)

    def allows(self, place: Place, server: str, tool: str) -> bool:
        found = self.rule_for(place)
        if found is None:
            return True
        _, rule = found
        if _any_match(rule.deny, server, tool):
            return False
        return not rule.allow or _any_match(rule.allow, server, tool)

    def members_remember(self, place: Place) -> bool:
        """Whether anyone may save memories for the place: the rule of the place the memory belongs to
        (a guild's memories are the whole guild's), never a rule about one person there."""
        kept_for = Place(platform=place.platform, guild=place.guild) if place.guild and not place.dm else None
        found = self.rule_for(kept_for or Place(platform=place.platform, channel=place.channel, dm=place.dm))
        return found is None or found[1].members_remember

    def model_for(self, place: Place) -> str | None:
        """The model the most specific rule naming one gives the place (a channel's rule that only
        allows servers keeps its guild's or platform's model); None: the primary."""
        return next(
            (rule.model for name in place.rule_names() if (rule := self.rules.get(name)) and rule.model), None
        )

    @property
    def models(self) -> dict[str, str]:
        """The models the policy names, by place."""
        return {name: rule.model for name, rule in self.rules.items() if rule.model}

    def offered(self, place: Place, tools: Iterable[_ToolT]) -> list[_ToolT]:
        return [tool for tool in tools if self.allows(place, tool.server, tool.original_name)]


def rule_name_problem(name: str, platforms: Platforms) -> str | None:
    """Why `name` cannot be a key of the policy section (one of the names `Place.rule_names` produces)."""
    if name == "*":
        return None
    try:
        place = Place.parse(name, platforms)
    except ValueError as exc:
        return str(exc)
    canonical = place.rule_names()[0]
    if canonical == name:
        return None
    named = (place.channel, place.guild, place.team, place.user)
    if sum(thing is not None for thing in named) + place.dm <= 1:
        return f"write place {name!r} as {canonical!r}"
    guilds = [f"'{platform.name}:guild:ID'" for platform in platforms.known if platform.guilds]
    guilds += [f"'{platform.name}:team:ID'" for platform in platforms.known if platform.teams]
    forms = ", ".join(["'*'", "a platform", "'PLATFORM:dm'", "'PLATFORM:CHANNEL'", *guilds])
    return f"place {name!r} names more than one thing; a rule is for one of {forms} or 'PLATFORM:user:ID'"


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is not a `server` or `server/tool` pattern, or None when it is."""
    server, slash, tool = pattern.partition("/")
    if not server or (slash and not tool):
        return f"{pattern!r} is not 'server' or 'server/tool'"
    if "/" in tool:
        return f"{pattern!r} has more than one '/'; write 'server/tool'"
    if any(ch.isspace() for ch in pattern):
        return f"{pattern!r} contains spaces; server and tool names have none"
    return None
