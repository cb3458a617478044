"""How people write a prompt's arguments after its name, on every surface: `topic=weather tone="very
dry"`; a value without a name fills the first required one.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from bot.errors import PromptError
from bot.types import PromptArgument, PromptSpec

# Chat clients turn typed quotes into typographic ones; the parser reads both.
_SMART_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "«": '"', "»": '"'})
_ARGUMENT_NAME = re.compile(r"[A-Za-z_][\w.-]*")


def words(text: str) -> list[str]:
    """The words of `text`, quotes and backslashes read as a shell reads them."""
    try:
        return shlex.split(text.translate(_SMART_QUOTES))
    except ValueError:
        raise PromptError('A quote is not closed: write values with spaces as topic="the weather".') from None


def lead_argument(spec: PromptSpec) -> PromptArgument | None:
    """The argument a value without a name fills: the first required one, else the first."""
    required = [a for a in spec.arguments if a.required]
    return next(iter(required or spec.arguments), None)


def _named(word: str) -> tuple[str, str] | None:
    """`name=value` when `word` is written that way (the name may be one the prompt lacks)."""
    key, equals, value = word.partition("=")
    if equals and _ARGUMENT_NAME.fullmatch(key):
        return key, value
    return None


def parse_arguments(spec: PromptSpec, text: str) -> dict[str, str]:
    """The arguments written after the prompt's name; empty values count as not given."""
    names = [a.name for a in spec.arguments]
    given: dict[str, str] = {}
    loose: list[str] = []
    for word in words(text):
        named = _named(word)
        if named is None:
            loose.append(word)
            continue
        key, value = named
        if key not in names:
            offered = f"its arguments are {', '.join(names)}" if names else "it takes no arguments"
            raise PromptError(f"The prompt {spec.name} has no argument {key!r}: {offered}.")
        if key in given:
            raise PromptError(f"{key} is given twice.")
        given[key] = value
    if loose:
        lead = lead_argument(spec)
        if lead is None:
            raise PromptError(f"The prompt {spec.name} takes no arguments.")
        if lead.name in given:
            raise PromptError(f"{lead.name} is given twice: once by name, once as {' '.join(loose)!r}.")
        given[lead.name] = " ".join(loose)
    return {key: value for key, value in given.items() if value.strip()}


def usage(spec: PromptSpec) -> str:
    """`summarize topic=… [tone=…]`: how the prompt is written, optional arguments in brackets."""
    return " ".join([spec.name, arguments_usage(spec)]).strip()


def arguments_usage(spec: PromptSpec) -> str:
    return " ".join(f"{a.name}=…" if a.required else f"[{a.name}=…]" for a in spec.arguments)


def quote(value: str) -> str:
    """A value as it is written back: in double quotes when it has spaces, quotes or `=`."""
    if value and not re.search(r"[\s\"'=\\]", value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True)
class Completion:
    """The argument whose value is being typed at the end of the text, and the rest of the text."""

    argument: str
    value: str
    known: dict[str, str]
    before: tuple[str, ...]
    named: bool

    def written(self, value: str) -> str:
        last = f"{self.argument}={quote(value)}" if self.named else quote(value)
        return " ".join([*self.before, last])


def _loose_words(text: str) -> list[str]:
    """The words of text still being typed: an unclosed quote counts as closed."""
    for ending in ("", '"', "'"):
        try:
            return shlex.split(text.translate(_SMART_QUOTES) + ending)
        except ValueError:
            continue
    return text.split()


def completion_at_end(spec: PromptSpec, text: str) -> Completion | None:
    """The value being typed at the end (of `name=`, or of the lead argument); None when none can be."""
    typed = _loose_words(text)
    if not typed or text[-1:].isspace():
        typed.append("")
    *earlier, last = typed
    names = {a.name for a in spec.arguments}
    before: list[str] = []
    known: dict[str, str] = {}
    loose: list[str] = []
    for word in earlier:
        named = _named(word)
        if named is not None and named[0] in names:
            known[named[0]] = named[1]
            before.append(f"{named[0]}={quote(named[1])}")
        else:
            loose.append(word)
    named = _named(last)
    if named is not None:
        if named[0] not in names:
            return None
        return Completion(named[0], named[1], known, tuple(before + [quote(w) for w in loose]), named=True)
    lead = lead_argument(spec)
    if lead is None or lead.name in known:
        return None
    value = " ".join([*loose, last]).strip()
    return Completion(argument=lead.name, value=value, known=known, before=tuple(before), named=False)
