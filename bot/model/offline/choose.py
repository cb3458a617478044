"""Which tools a question calls: the best-matching ones that only read, each for its own part of it.

Rules cannot tell "read the file" from "overwrite the file", so they are narrow on purpose: a tool
that says it changes something is never called, and besides the best match another is called only
for a value of the question that no chosen tool uses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.model.offline.fill import LAT_NAMES, LNG_NAMES, Filled, coordinates, named_number
from bot.model.offline.words import WORD, content_words, related
from bot.types import ToolSpec

# A tool's name that holds one of these words changes something, unless the name starts by saying
# it reads ("get_post", "list_updates").
# fmt: off
_CHANGING_NAMES = {
    "write", "overwrite", "move", "mv", "delete", "del", "remove", "rm", "erase", "send", "create",
    "edit", "update", "upsert", "set", "put", "patch", "post", "rename", "upload", "publish", "submit",
    "save", "insert", "append", "replace", "drop", "destroy", "purge", "push", "commit", "merge",
    "transfer", "modify", "change", "kill", "clear", "reset", "add", "execute", "exec", "approve",
    "install", "uninstall", "truncate", "mkdir", "touch", "copy", "cp",
}
_READING_NAMES = {
    "get", "read", "list", "search", "find", "fetch", "query", "lookup", "look", "show", "view",
    "describe", "check", "count", "simulate", "peek", "stat", "info",
}
# Verbs a description uses to say the tool changes something. Past participles are left out on
# purpose: "created at" and "last modified" describe what a reading tool returns.
_CHANGING_VERBS = {
    "write", "writes", "overwrite", "overwrites", "move", "moves", "delete", "deletes", "remove",
    "removes", "erase", "erases", "send", "sends", "create", "creates", "edit", "edits", "update",
    "updates", "rename", "renames", "upload", "uploads", "post", "posts", "publish", "publishes",
    "submit", "submits", "modify", "modifies", "insert", "inserts", "append", "appends", "destroy",
    "destroys", "purge", "purges", "save", "saves",
}
# fmt: on
_NEGATIONS = {"not", "never", "no", "without", "nothing", "t", "cannot"}  # "doesn't" splits into "doesn", "t"
_NEGATIVE = re.compile(r"^(do not|don't|never|not for|avoid)\b", re.I)


def name_words(tool: ToolSpec) -> list[str]:
    """`writeFile` and `write_file` alike → ["write", "file"]."""
    return [w.lower() for w in WORD.findall(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", tool.name))]


def changes_things(tool: ToolSpec) -> bool:
    """The tool's name or description says it writes, moves, deletes, sends or otherwise changes."""
    words = name_words(tool)
    if words and words[0] not in _READING_NAMES and any(w in _CHANGING_NAMES for w in words):
        return True
    said = [w.lower() for w in WORD.findall(tool.description)]
    return any(
        w in _CHANGING_VERBS and not _NEGATIONS.intersection(said[max(0, i - 3) : i])
        for i, w in enumerate(said)
    )


def _description_words(tool: ToolSpec) -> list[str]:
    # "Do not use for forecasts" and other tools' names are reasons *not* to pick this tool.
    sentences = re.split(r"(?<=[.!?;])\s+", tool.description)
    kept = " ".join(s for s in sentences if not _NEGATIVE.match(s))
    return content_words(" ".join(name_words(tool))) + content_words(re.sub(r"\w+_\w+", " ", kept))


def _said(trigger: str, lowered: str) -> bool:
    if trigger.isascii():
        return re.search(rf"(?<!\w){re.escape(trigger)}(?!\w)", lowered) is not None
    return trigger in lowered  # CJK has no spaces between words


def takes_these_coordinates(tool: ToolSpec, question: str) -> bool:
    """Coordinates in the question are reason enough to call a tool that takes a latitude."""
    names = [str(n).lower() for n in tool.parameters.get("properties") or {}]
    lat = next((n for n in names if n in LAT_NAMES), None)
    if lat is None or not any(n in LNG_NAMES for n in names):
        return False
    return coordinates(question) is not None or named_number(lat, question) is not None


def words_run_together(tool: ToolSpec, question: str) -> int:
    """How many question words a part of the tool's name runs together (`whoami` is "who am I").

    A run grows only while it is a prefix of the part, so a long question does not cost its length cubed."""
    said = [w.lower() for w in WORD.findall(question)]
    count = 0
    for part in name_words(tool):
        longest = 0
        for start in range(len(said)):
            run = ""
            for end in range(start, len(said)):
                run += said[end]
                if not part.startswith(run):
                    break
                if run == part and end > start:
                    longest = max(longest, end + 1 - start)
        count += longest
    return count


def relevance(tool: ToolSpec, question: str) -> int:
    """How much of the question points at this tool; 0 means nothing does.

    A trigger counts most (chosen by the operator), then coordinates, then name words, then description."""
    lowered = question.lower()
    asked = set(content_words(question))
    score = 3 * sum(1 for t in tool.triggers if t.strip() and _said(t.lower().strip(), lowered))
    score += 2 if takes_these_coordinates(tool, question) else 0
    own = set(content_words(" ".join(name_words(tool))))
    score += 2 * sum(1 for n in own if any(related(n, w) for w in asked))
    score += 2 * words_run_together(tool, question)
    described = _description_words(tool)
    return score + sum(1 for w in asked if any(related(w, d) for d in described))


@dataclass(frozen=True, slots=True)
class Candidate:
    """A tool the question points at, how strongly, and the arguments read for it."""

    tool: ToolSpec
    score: int
    filled: Filled
    order: int

    @property
    def ready(self) -> bool:
        return not self.filled.missing and not changes_things(self.tool)


def ranked(candidates: list[Candidate]) -> list[Candidate]:
    """Best match first; on a tie a tool that only reads, then the order the host lists them in."""
    return sorted(candidates, key=lambda c: (-c.score, changes_things(c.tool), c.order))


def choose(candidates: list[Candidate]) -> list[Candidate]:
    """The calls to make: the best ready tool, plus each ready one that covers another part.

    A tool that uses no value from the question is called only as the best match, when no tool uses one."""
    order = ranked(candidates)
    ready = [c for c in order if c.ready]
    with_values = [c for c in ready if c.filled.used]
    if not with_values:
        return order[:1] if order and order[0].ready else []
    chosen: list[Candidate] = []
    covered: set[str] = set()
    for candidate in with_values:
        if candidate.filled.used - covered:
            chosen.append(candidate)
            covered |= candidate.filled.used
    return sorted(chosen, key=lambda c: c.order)
