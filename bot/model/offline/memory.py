"""Remembering, recalling and forgetting on the offline model, with the product's own memory tools.

They are the only tools that change something the offline model calls, because the person asked
in so many words ("remember that …", "forget …"), the change is theirs or their place's, and the
answer says what was kept or removed. The general tool ranking never picks them.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.model.offline.answer import parse_result
from bot.model.offline.memory_words import MemoryRequest, read_request
from bot.model.offline.question import related, stem
from bot.types import ChatMessage, ToolSpec

SERVER = "memory"
_TOOLS = ("remember", "recall", "forget")

Call = tuple[ToolSpec, dict[str, Any]]
"""A memory tool to call and its arguments."""


def is_memory_tool(tool: ToolSpec) -> bool:
    """One of the product's memory tools, by where it comes from and its own name, whatever it is
    exposed as."""
    return tool.server == SERVER and tool.original_name in _TOOLS


def memory_hint(tools: Sequence[ToolSpec]) -> str:
    """What a person may ask of the memory tools offered here ("" when none is), for the help."""
    has = {name for name in _TOOLS if _tool(tools, name) is not None}
    asks = [
        "“remember that my area code is A1001”" if "remember" in has else "",
        "“what do you remember about me?”" if "recall" in has else "",
        "“forget that my area code is A1001”" if {"recall", "forget"} <= has else "",  # found, then forgotten
    ]
    said = ", ".join(a for a in asks if a)
    return f"I can also remember things for you: say {said}." if said else ""


def _tool(tools: Sequence[ToolSpec], original_name: str) -> ToolSpec | None:
    return next((t for t in tools if t.server == SERVER and t.original_name == original_name), None)


@dataclass(frozen=True, slots=True)
class _Result:
    """A memory tool's result since the question: which tool, what it said, whether it failed."""

    tool: str
    data: Any
    text: str
    failed: bool


def _results(since: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> list[_Result]:
    calls = {c.id: c.name for m in since for c in m.tool_calls}
    exposed = {t.name: t.original_name for t in tools if is_memory_tool(t)}
    found: list[_Result] = []
    for m in since:
        name = exposed.get(calls.get(m.tool_call_id or "") or m.name or "")
        if m.role != "tool" or name is None:
            continue
        data, text = parse_result(m.content or "")
        if data is None and text.startswith('"'):
            with contextlib.suppress(ValueError):
                text = str(json.loads(text))  # a text result, presented to models as a JSON string
        failed = m.is_error or (isinstance(data, dict) and bool(data.get("error")) and "memories" not in data)
        found.append(_Result(name, data, text.strip(), failed))
    return found


def _reason(result: _Result) -> str:
    if isinstance(result.data, dict):
        said = next((result.data[k] for k in ("error", "message", "detail") if result.data.get(k)), None)
        if said is not None:
            return str(said)
    return result.text or "no reason given"


def _last(results: list[_Result], tool: str) -> _Result | None:
    return next((r for r in reversed(results) if r.tool == tool), None)


def memory_turn(
    question: str, since: Sequence[ChatMessage], tools: Sequence[ToolSpec]
) -> str | list[Call] | None:
    """The next step of a memory request: the calls to make, or the answer from their results; None
    when the question asks nothing of memory, or the tools it needs are not offered here."""
    request = read_request(question)
    if request is None:
        return None
    needed = {"remember": ["remember"], "recall": ["recall"], "forget": ["forget"]}[request.kind]
    if request.kind == "forget" and request.memory_id is None and request.hint is None:
        needed.append("recall")
    offered = {name: spec for name in needed if (spec := _tool(tools, name)) is not None}
    if len(offered) < len(needed):
        return None
    if request.hint is not None:
        return request.hint
    results = _results(since, tools)
    if request.kind == "remember":
        return _remember(request, offered["remember"], _last(results, "remember"))
    if request.kind == "recall":
        done = _last(results, "recall")
        return [(offered["recall"], {"query": request.query})] if done is None else _listing(request, done)
    return _forget(request, offered, results)


def _remember(request: MemoryRequest, tool: ToolSpec, done: _Result | None) -> str | list[Call]:
    if done is None:
        args: dict[str, Any] = {"text": request.text, "about": request.about}
        if request.anywhere:
            args["anywhere"] = True
        return [(tool, args)]
    if done.failed:
        return f"I didn't remember that: {_reason(done)}"
    if isinstance(done.data, dict) and done.data.get("remembered"):
        # The reply's own "Remembered for …" line says what was saved.
        return "Got it, I'll remember that."
    return done.text or f"Remembered: {request.text}"


def _memories(data: Any) -> list[dict[str, Any]]:
    listed = data.get("memories") if isinstance(data, dict) else data
    return [m for m in listed if isinstance(m, dict) and m.get("text")] if isinstance(listed, list) else []


def _bullet(memory: dict[str, Any]) -> str:
    notes = ["this place"] if memory.get("about") == "here" else []
    notes += ["anywhere"] if memory.get("anywhere") is True else []
    notes += [f"id {memory['id']}"] if memory.get("id") else []
    return f"- {memory['text']}" + (f" ({'; '.join(notes)})" if notes else "")


def _listing(request: MemoryRequest, done: _Result) -> str:
    if done.failed:
        return f"I couldn't look through what I remember: {_reason(done)}"
    memories = _memories(done.data)
    if not memories:
        if done.data is None and done.text:
            return f"Here's what I remember:\n\n{done.text}"
        subject = f"“{request.text}”" if request.text else "this place" if request.about == "here" else "you"
        return f"I don't remember anything about {subject} yet."
    more = isinstance(done.data, dict) and done.data.get("more") is True
    tail = "\n\nThere's more: ask about something in particular to narrow it down." if more else ""
    lines = "\n".join(_bullet(m) for m in memories)
    return f"Here's what I remember:\n\n{lines}{tail}\n\nTo remove one, say “forget <id>”."


def _words(text: str) -> list[str]:
    return [stem(w) for w in re.findall(r"[\w'-]+", text.casefold())]


def _same(a: str, b: str) -> bool:
    """One word of the query in a memory's words: "likes" finds "like", "A1001" only "A1001"."""
    short, long = sorted((a, b), key=len)
    return related(a, b) or (len(short) >= 3 and long.startswith(short) and not short.isdigit())


def _best_match(query: str, memories: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The memory sharing the most of the query's words, the search's own order on a tie. A match
    shares more than half of them and every one holding a digit: "area code is A1001" is not "area
    code is B2002"."""
    wanted = _words(query)
    best: tuple[int, dict[str, Any]] | None = None
    for memory in memories:
        own = _words(str(memory["text"]))
        shared = [w for w in wanted if any(_same(w, o) for o in own)]
        values = all(w in shared for w in wanted if any(c.isdigit() for c in w))
        if (
            memory.get("id")
            and values
            and 2 * len(shared) > len(wanted)
            and (best is None or len(shared) > best[0])
        ):
            best = (len(shared), memory)
    return None if best is None else best[1]


def _forget(request: MemoryRequest, offered: dict[str, ToolSpec], results: list[_Result]) -> str | list[Call]:
    """An id is forgotten at once; words are looked up first, and the memory they match forgotten."""
    done = _last(results, "forget")
    if done is not None:
        if done.failed:
            return f"I couldn't forget that: {_reason(done)}"
        if isinstance(done.data, dict) and done.data.get("forgot"):
            return f"Forgotten: {done.data['forgot']}"
        return done.text or "Forgotten."
    if request.memory_id is not None:
        return [(offered["forget"], {"memory_id": request.memory_id})]
    found = _last(results, "recall")
    if found is None:
        return [(offered["recall"], {"query": request.query})]
    if found.failed:
        return f"I couldn't look through what I remember: {_reason(found)}"
    match = _best_match(request.query, _memories(found.data))
    if match is None:
        return f"I don't remember anything matching “{request.text}”, so there was nothing to forget."
    return [(offered["forget"], {"memory_id": str(match["id"])})]
