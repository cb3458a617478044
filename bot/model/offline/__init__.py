"""The offline model: what answers when no model service is configured.

`make run` does something real on a fresh clone without an API key, a network or a download.
Rules cannot tell "read the file" from "overwrite the file", so they are narrow on purpose: a tool
that says it changes something is never called, and besides the best match another is called only
for a value of the question that no chosen tool uses. The product's memory tools are the exception,
called only for a request that says "remember" or "forget" in so many words (`memory`). A shared
file is named with its type, size and first lines (`files`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.model.offline.answer import VERBS, format_value, read_outcomes, tool_title, write_answer
from bot.model.offline.files import files_answer, is_file_tool
from bot.model.offline.memory import is_memory_tool, memory_hint, memory_turn
from bot.model.offline.question import (
    LAT_NAMES,
    LNG_NAMES,
    WORD,
    Filled,
    content_words,
    coordinates,
    fill,
    name_words,
    named_number,
    norm,
    read_question,
    related,
)
from bot.model.offline.remembered import remembered_values
from bot.model.offline.schedules import is_schedule_tool, schedule_turn
from bot.model.tokens import estimate_message_tokens, estimate_tools_tokens
from bot.text.render import truncate
from bot.text.turn_note import split_note, without_note
from bot.types import ChatMessage, Completion, Progress, ToolCall, ToolSpec, TurnEvent, Usage

# A word with the blanks after it (or blanks that open the text): the pieces join back exactly.
_WORDS = re.compile(r"\S+\s*|\s+")

_GREETINGS = {"hi", "hello", "hey", "hiya", "yo", "morning", "evening", "afternoon", "thanks", "thank"}
_GREETINGS |= {"你好", "您好", "嗨", "谢谢"}
_SMALL_TALK = _GREETINGS | {"there", "good", "you", "all", "everyone", "bot", "nerve", "so", "much", "ok"}
# fmt: off
# Verbs a description uses to say the tool changes something (with their "-s" forms). Past
# participles are left out on purpose: "created at" and "last modified" describe what a tool reads.
_CHANGING_VERBS = {
    "write", "overwrite", "move", "delete", "remove", "erase", "send", "create", "edit", "update",
    "rename", "upload", "post", "publish", "submit", "modify", "insert", "append", "destroy", "purge",
    "save",
}
# A tool's name that holds one of these words changes something, unless it starts by saying it
# reads ("get_post", "list_updates").
_CHANGING_NAMES = _CHANGING_VERBS | {
    "mv", "del", "rm", "upsert", "set", "put", "patch", "replace", "drop", "push", "commit", "merge",
    "transfer", "change", "kill", "clear", "reset", "add", "execute", "exec", "approve", "install",
    "uninstall", "truncate", "mkdir", "touch", "copy", "cp",
}
# fmt: on
_READING_NAMES = VERBS | {"show", "view", "describe", "count", "peek", "stat", "info"}
_SAID_CHANGING = _CHANGING_VERBS | {v + "s" for v in _CHANGING_VERBS} | {"publishes", "modifies"}
_NEGATIONS = {"not", "never", "no", "without", "nothing", "t", "cannot"}  # "doesn't" splits into "doesn", "t"
_NEGATIVE = re.compile(r"^(do not|don't|never|not for|avoid)\b", re.I)

# Values an example question gives a latitude or longitude that has no example of its own.
_EXAMPLE_COORDINATES = {**dict.fromkeys(LAT_NAMES, 31.23), **dict.fromkeys(LNG_NAMES, 121.47)}
_INTRO = "I'm the offline model, a simple rule-based stand-in used because no model API key is set."
_REAL = "For free-form questions, set `OPENAI_API_KEY` (or `OPENAI_BASE_URL` and `NERVE_MODEL`)."


def changes_things(tool: ToolSpec) -> bool:
    """The tool's name or description says it writes, moves, deletes, sends or otherwise changes."""
    words = name_words(tool)
    if words and words[0] not in _READING_NAMES and any(w in _CHANGING_NAMES for w in words):
        return True
    said = [w.lower() for w in WORD.findall(tool.description)]
    return any(
        w in _SAID_CHANGING and not _NEGATIONS.intersection(said[max(0, i - 3) : i])
        for i, w in enumerate(said)
    )


def _said(trigger: str, lowered: str) -> bool:
    if trigger.isascii():
        return re.search(rf"(?<!\w){re.escape(trigger)}(?!\w)", lowered) is not None
    return trigger in lowered  # CJK has no spaces between words


def _takes_these_coordinates(tool: ToolSpec, question: str) -> bool:
    """Coordinates in the question are reason enough to call a tool that takes a latitude."""
    names = [str(n).lower() for n in tool.parameters.get("properties") or {}]
    lat = next((n for n in names if n in LAT_NAMES), None)
    if lat is None or not any(n in LNG_NAMES for n in names):
        return False
    return coordinates(question) is not None or named_number(lat, question) is not None


def _words_run_together(tool: ToolSpec, question: str) -> int:
    """How many question words a part of the tool's name runs together (`whoami` is "who am I")."""
    count = 0
    for part in name_words(tool):
        spelled = r"[\W_]*".join(map(re.escape, part))
        runs = re.finditer(rf"(?<![^\W_]){spelled}(?![^\W_])", question.lower())
        count += max((n for run in runs if (n := len(WORD.findall(run.group(0)))) > 1), default=0)
    return count


def relevance(tool: ToolSpec, question: str) -> int:
    """How much of the question points at this tool (0: nothing): an operator's trigger counts most,
    then coordinates, then name words, then the description."""
    lowered = question.lower()
    asked = set(content_words(question))
    score = 3 * sum(1 for t in tool.triggers if t.strip() and _said(t.lower().strip(), lowered))
    score += 2 if _takes_these_coordinates(tool, question) else 0
    own = content_words(" ".join(name_words(tool)))
    score += 2 * sum(1 for n in set(own) if any(related(n, w) for w in asked))
    score += 2 * _words_run_together(tool, question)
    # "Do not use for forecasts" and other tools' names are reasons *not* to pick this tool.
    sentences = re.split(r"(?<=[.!?;])\s+", tool.description)
    kept = re.sub(r"\w+_\w+", " ", " ".join(s for s in sentences if not _NEGATIVE.match(s)))
    described = own + content_words(kept)
    return score + sum(1 for w in asked if any(related(w, d) for d in described))


@dataclass(frozen=True, slots=True)
class Candidate:
    tool: ToolSpec
    score: int
    filled: Filled
    order: int


def candidates(question: str, tools: list[ToolSpec], known: dict[str, Any] | None = None) -> list[Candidate]:
    """Every tool the question points at, best match first; on a tie one that only reads, then the
    host's order. A JSON question whose keys are a tool's argument names points at it, like its name."""
    q = read_question(question)
    found: list[Candidate] = []
    for order, tool in enumerate(tools):
        named = {norm(str(p)) for p in tool.parameters.get("properties") or {}}
        score = relevance(tool, question) + 2 * len(named.intersection(q.fields))
        if score > 0:
            found.append(Candidate(tool, score, fill(tool, q, known), order))
    return sorted(found, key=lambda c: (-c.score, changes_things(c.tool), c.order))


def choose(ranked: list[Candidate]) -> list[Candidate]:
    """The best ready tool, plus each ready one that covers another part; one that uses no value
    from the question is called only as the best match, when no tool uses one."""
    ready = [c for c in ranked if not c.filled.missing and not changes_things(c.tool)]
    with_values = [c for c in ready if c.filled.used]
    if not with_values:
        return ranked[:1] if ranked and ranked[0] in ready else []
    chosen: list[Candidate] = []
    covered: set[str] = set()
    for candidate in with_values:
        if candidate.filled.used - covered:
            chosen.append(candidate)
            covered |= candidate.filled.used
    return sorted(chosen, key=lambda c: c.order)


class OfflineModel:
    """Ranks the tools by how much of the question they share, never calls one whose required
    arguments it could not read (it says so instead), and sums up only what the results say."""

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        """Answer the latest real question: with tool calls, or from the results that followed it."""
        question, since = _latest_question(messages)
        # The memory tools serve only "remember …", "forget …" and "what do you remember?"; the
        # schedule tools "remind me in …", "what's scheduled?" and "cancel reminder …".
        # The file tools neither: it answers from the files it was given (`files`).
        others = [t for t in tools if not (is_memory_tool(t) or is_schedule_tool(t) or is_file_tool(t))]
        memory = schedule_turn(question, messages, since, tools)
        if memory is None:
            memory = memory_turn(question, since, tools)
        if memory is not None:
            reply = memory if isinstance(memory, str) else [_as_candidate(t, args) for t, args in memory]
        elif any(m.role == "tool" for m in since):
            chosen = _next_round(question, since, others)
            reply = chosen or write_answer(question, read_outcomes(since, tools))
        elif (about := files_answer(question, messages)) is not None:
            reply = about
        else:
            reply = _decide(question, others, remembered_values(messages), memory_hint(tools))
        if isinstance(reply, str):
            # Word by word, as a model service streams, so front ends show the answer as it comes.
            for word in _WORDS.findall(reply):
                await progress(TurnEvent(kind="text", message=word))
            message = ChatMessage(role="assistant", content=reply)
        else:
            calls = tuple(
                ToolCall(
                    id=f"call_offline_{i}",
                    name=c.tool.name,
                    arguments=json.dumps(c.filled.args, ensure_ascii=False),
                )
                for i, c in enumerate(reply, 1 + sum(len(m.tool_calls) for m in messages))
            )
            message = ChatMessage(role="assistant", tool_calls=calls)
        prompt = estimate_message_tokens(messages) + estimate_tools_tokens(tools)
        completion = estimate_message_tokens([message])
        return Completion(message=message, usage=Usage(prompt_tokens=prompt, completion_tokens=completion))


def _latest_question(messages: Sequence[ChatMessage]) -> tuple[str, list[ChatMessage]]:
    """The latest user message but the host's "are you sure no tool is needed?", and what followed."""
    for i in range(len(messages) - 1, -1, -1):
        text = split_note(messages[i].content or "")[0].lower()
        sure = any(w in text for w in ("sure", "confirm", "certain"))
        nudge = ("tool" in text and "need" in text and sure) or ("确定" in text and "工具" in text)
        if messages[i].role == "user" and not nudge:
            # Once tools answered, the note ends the latest result: what followed is read without it.
            return split_note(messages[i].content or "")[0], without_note(messages[i + 1 :])
    return "", list(messages)


def _as_candidate(tool: ToolSpec, args: dict[str, Any]) -> Candidate:
    return Candidate(tool, 0, Filled(args, frozenset(), [], False), 0)


def _decide(
    question: str, tools: list[ToolSpec], remembered: dict[str, Any], hint: str
) -> str | list[Candidate]:
    """The calls for a question; a remembered value ("area code is A1001") fills a required argument
    only when the question alone lets no tool be called, so a place it names comes first. `hint`:
    what else may be asked, said with the help and the greeting."""
    words = [w.lower() for w in WORD.findall(question)]
    if all(w in _SMALL_TALK for w in words) and any(w in _GREETINGS for w in words):
        return _greeting(words, tools, hint)
    ranked = candidates(question, tools)
    if ranked and changes_things(ranked[0].tool):
        return _refusal(ranked[0].tool)
    chosen = choose(ranked)
    if not chosen and remembered:
        ranked = candidates(question, tools, remembered)
        chosen = choose(ranked)
    missing = next((c for c in ranked if c.filled.missing and not changes_things(c.tool)), None)
    return chosen or _help(tools, missing, hint)


def _next_round(question: str, since: list[ChatMessage], tools: list[ToolSpec]) -> list[Candidate]:
    """Calls of tools not called yet that the results made possible: after a sign-in replaced the
    tool that asked for it, the question weighed again; else a value a result holds may fill another
    tool ("near 31.2, 121.4" → an area code → the air there)."""
    last = next((m for m in reversed(since) if m.tool_calls), None)
    called = {c.name for m in since for c in m.tool_calls}
    fresh = [t for t in tools if t.name not in called]
    replaced = last is not None and not {c.name for c in last.tool_calls} & {t.name for t in tools}
    chosen = choose(candidates(question, fresh)) if replaced else []
    if not chosen:
        known: dict[str, Any] = {}
        _collect([o.data for o in read_outcomes(since, tools) if not o.failed], known)
        chosen = choose([c for c in candidates(question, fresh, known) if c.filled.from_results])
    return chosen


def _collect(data: Any, known: dict[str, Any]) -> None:
    """Every scalar in a JSON result by key, first one wins."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        if isinstance(value, dict | list):
            _collect(value, known)
        elif isinstance(key, str):
            known.setdefault(key, value)


def _purpose(tool: ToolSpec) -> str:
    first = re.split(r"(?<=[.!?。])\s", " ".join(tool.description.split()), maxsplit=1)[0]
    needs = tool.parameters.get("required") or []
    return truncate(first, 100)[0] + (f" (needs {', '.join(needs)})" if needs else "")


def _example(tool: ToolSpec) -> str:
    """A question this model would turn into a call of `tool`, built from its schema."""
    properties = tool.parameters.get("properties") or {}
    values: list[str] = []
    for name in tool.parameters.get("required") or []:
        found = properties.get(name)
        prop: dict[str, Any] = found if isinstance(found, dict) else {}
        given = (prop.get("examples") or [prop.get("default")])[0]
        given = _EXAMPLE_COORDINATES.get(name.lower()) if given is None else given
        values.append(f"<{name}>" if given is None else format_value(given))
    return tool_title(tool.name) + (f" for {', '.join(values)}?" if values else "?")


def _needs(tool: ToolSpec, names: list[str]) -> str:
    """What the missing arguments are, in the schema's own words ("country (Country the city is in)")."""
    properties = tool.parameters.get("properties") or {}
    about = {n: str(p.get("description") or "").strip() for n, p in properties.items() if isinstance(p, dict)}
    return ", ".join(f"{n} ({truncate(about[n].rstrip('.'), 100)[0]})" if about.get(n) else n for n in names)


def _help(tools: Sequence[ToolSpec], missing: Candidate | None, hint: str = "") -> str:
    also = f"\n\n{hint}" if hint else ""
    if not tools:
        return (
            f"{_INTRO} No tools are connected right now: add an MCP server to the servers file."
            f"{also}\n\n{_REAL}"
        )
    if missing is not None:
        tool, unfilled = missing.tool, missing.filled.missing
        why = (
            f"`{tool.name}` looks relevant, but I couldn't find {', '.join(unfilled)} in your message, "
            f"so I didn't call it. Tell me {_needs(tool, unfilled)} and ask again."
        )
    else:
        why = "I can only answer by calling a tool, and none of mine fits that question."
    reading = [t for t in tools if not changes_things(t)]
    listing = "\n".join(f"- `{t.name}`: {_purpose(t)}" for t in reading[:10])
    examples = [_example(t) for t in reading]
    example = next((e for e in examples if "<" not in e), examples[0] if examples else "")
    tail = f"\n\nFor example: “{example}”" if example else ""
    return f"{_INTRO} {why}\n\nTools I can use:\n{listing or '(none that only read)'}{tail}{also}\n\n{_REAL}"


def _refusal(tool: ToolSpec) -> str:
    return (
        f"{_INTRO} `{tool.name}` looks like the tool for that, but it changes things (it writes, moves, "
        "deletes or sends), and I only call tools that read, so I didn't call it and nothing was changed. "
        f"{_REAL}"
    )


def _greeting(words: list[str], tools: Sequence[ToolSpec], hint: str = "") -> str:
    if any(w in ("thanks", "thank", "谢谢") for w in words):
        return "You're welcome!"
    names = ", ".join(f"`{t.name}`" for t in tools[:10]) or "no tools yet"
    also = f" {hint}" if hint else ""
    hello = "Hello! I'm nerve, running on the built-in offline model."
    return f"{hello} I can use: {names}.{also} Ask me something."
