"""The offline model: what answers when no model service is configured.

`make run` does something real on a fresh clone without an API key, a network or a download.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from bot.model.offline.answer import Outcome, format_value, read_outcomes, tool_title, write_answer
from bot.model.offline.choose import Candidate, changes_things, choose, name_words, ranked, relevance
from bot.model.offline.fill import LAT_NAMES, LNG_NAMES, Question, fill, norm, read_question
from bot.model.offline.words import WORD
from bot.model.tokens import estimate_message_tokens, estimate_tools_tokens
from bot.text.render import truncate
from bot.types import ChatMessage, Completion, Progress, ToolCall, ToolSpec, TurnEvent, Usage

# A word with the blanks after it (or blanks that open the text): the pieces join back exactly.
_WORDS = re.compile(r"\S+\s*|\s+")

_GREETINGS = {"hi", "hello", "hey", "hiya", "yo", "morning", "evening", "afternoon", "thanks", "thank"}
_GREETINGS |= {"你好", "您好", "嗨", "谢谢"}
_SMALL_TALK = _GREETINGS | {"there", "good", "you", "all", "everyone", "bot", "nerve", "so", "much", "ok"}


class OfflineModel:
    """A deterministic, rule-based stand-in for a chat model, so nerve works without an API key.

    It ranks the tools by how much of the question they share and reads their arguments from the text by
    their JSON Schemas (`bot.model.offline.choose`, `bot.model.offline.fill`); it never calls a tool that
    changes something, nor one whose required arguments it could not read, and says so instead. Its
    summary states only what the results say. For a real model set OPENAI_API_KEY, or OPENAI_BASE_URL
    plus NERVE_MODEL."""

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        """Answer the latest real question: with tool calls, or from the results that followed it."""
        at = _question_index(messages)
        question = (messages[at].content or "") if at is not None else ""
        since = list(messages[at + 1 :]) if at is not None else list(messages)
        first_id = 1 + sum(len(m.tool_calls) for m in messages)
        if any(m.role == "tool" for m in since):
            outcomes = read_outcomes(since, tools)
            message = (
                _decide_anew(question, since, tools, first_id)
                or _follow_up(question, since, outcomes, tools, first_id)
                or ChatMessage(role="assistant", content=write_answer(question, outcomes))
            )
        else:
            message = _decide(question, tools, first_id)
        if message.content and not message.tool_calls:
            # Word by word, as a model service streams, so front ends show the answer as it comes.
            for word in _WORDS.findall(message.content):
                await progress(TurnEvent(kind="text", message=word))
        prompt = estimate_message_tokens(messages) + estimate_tools_tokens(tools)
        completion = estimate_message_tokens([message])
        return Completion(message=message, usage=Usage(prompt_tokens=prompt, completion_tokens=completion))


def _is_nudge(message: ChatMessage) -> bool:
    """The host's "are you sure no tool is needed?" message, which is not a new question."""
    text = (message.content or "").lower()
    asks = "tool" in text and "need" in text and any(w in text for w in ("sure", "confirm", "certain"))
    return asks or ("确定" in text and "工具" in text)


def _question_index(messages: Sequence[ChatMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == "user" and not _is_nudge(messages[i]):
            return i
    return None


# --- deciding which tools to call -------------------------------------------------------------------


def _candidates(
    question: str, tools: Sequence[ToolSpec], known: dict[str, Any] | None = None
) -> list[Candidate]:
    """Every tool the question points at, with the arguments that could be read for it."""
    q: Question = read_question(question)
    found: list[Candidate] = []
    for order, tool in enumerate(tools):
        # A JSON question whose keys are this tool's argument names points at it, like its name would.
        named = {norm(str(p)) for p in tool.parameters.get("properties") or {}}
        score = relevance(tool, question) + 2 * len(named.intersection(q.fields))
        if score > 0:
            found.append(
                Candidate(tool, score, fill(tool.parameters, q, set(name_words(tool)), known), order)
            )
    return found


def _calls(chosen: list[Candidate], first_id: int) -> ChatMessage:
    calls = tuple(
        ToolCall(
            id=f"call_offline_{first_id + i}",
            name=c.tool.name,
            arguments=json.dumps(c.filled.args, ensure_ascii=False),
        )
        for i, c in enumerate(chosen)
    )
    return ChatMessage(role="assistant", tool_calls=calls)


def _decide(question: str, tools: Sequence[ToolSpec], first_id: int) -> ChatMessage:
    words = [w.lower() for w in WORD.findall(question)]
    if words and all(w in _SMALL_TALK for w in words) and any(w in _GREETINGS for w in words):
        return ChatMessage(role="assistant", content=_greeting(words, tools))
    candidates = _candidates(question, tools)
    best = ranked(candidates)[0] if candidates else None
    if best is not None and changes_things(best.tool):
        return ChatMessage(role="assistant", content=_refusal(best.tool))
    chosen = choose(candidates)
    if chosen:
        return _calls(chosen, first_id)
    missing = [c for c in ranked(candidates) if c.filled.missing and not changes_things(c.tool)]
    return ChatMessage(role="assistant", content=_help(tools, missing[0] if missing else None))


def _decide_anew(
    question: str, since: Sequence[ChatMessage], tools: Sequence[ToolSpec], first_id: int
) -> ChatMessage | None:
    """Calls for the question among tools that replaced those the last round called.

    A sign-in (`connect_notes`) makes the server's own tools appear in place of the one that asked for
    it; the question is then weighed again, as in a first round, among the tools not called yet."""
    last = next((m for m in reversed(since) if m.tool_calls), None)
    offered = {t.name for t in tools}
    if last is None or any(c.name in offered for c in last.tool_calls):
        return None
    called = {c.name for m in since for c in m.tool_calls}
    chosen = choose(_candidates(question, [t for t in tools if t.name not in called]))
    return _calls(chosen, first_id) if chosen else None


def _follow_up(
    question: str,
    since: Sequence[ChatMessage],
    outcomes: list[Outcome],
    tools: Sequence[ToolSpec],
    first_id: int,
) -> ChatMessage | None:
    """Calls the first results made possible ("near 31.2, 121.4" → an area code → the air there)."""
    called = {c.name for m in since for c in m.tool_calls}
    known: dict[str, Any] = {}
    for outcome in outcomes:
        if not outcome.failed:
            _collect(outcome.data, known)
    fresh = [t for t in tools if t.name not in called]
    candidates = [c for c in _candidates(question, fresh, known) if "result" in c.filled.sources.values()]
    chosen = choose(candidates)
    return _calls(chosen, first_id) if chosen else None


def _collect(data: Any, known: dict[str, Any]) -> None:
    """Every scalar in a JSON result by key, first one wins."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else []
    for key, value in items:
        if isinstance(value, dict | list):
            _collect(value, known)
        elif isinstance(key, str):
            known.setdefault(key, value)


# --- answering without tools ------------------------------------------------------------------------


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
        if given is None and name.lower() in LAT_NAMES:
            given = 31.23
        elif given is None and name.lower() in LNG_NAMES:
            given = 121.47
        values.append(f"<{name}>" if given is None else format_value(given))
    return tool_title(tool.name) + (f" for {', '.join(values)}?" if values else "?")


_INTRO = "I'm the offline model, a simple rule-based stand-in used because no model API key is set."
_REAL = "For free-form questions, set `OPENAI_API_KEY` (or `OPENAI_BASE_URL` and `NERVE_MODEL`)."


def _needs(tool: ToolSpec, names: list[str]) -> str:
    """What the missing arguments are, in the schema's own words ("country (Country the city is in)")."""
    properties = tool.parameters.get("properties") or {}
    parts = []
    for name in names:
        prop = properties.get(name)
        about = str(prop.get("description") or "").strip() if isinstance(prop, dict) else ""
        parts.append(f"{name} ({truncate(about.rstrip('.'), 100)[0]})" if about else name)
    return ", ".join(parts)


def _help(tools: Sequence[ToolSpec], missing: Candidate | None) -> str:
    if not tools:
        return f"{_INTRO} No tools are connected right now: add an MCP server to the servers file.\n\n{_REAL}"
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
    return f"{_INTRO} {why}\n\nTools I can use:\n{listing or '(none that only read)'}{tail}\n\n{_REAL}"


def _refusal(tool: ToolSpec) -> str:
    return (
        f"{_INTRO} `{tool.name}` looks like the tool for that, but it changes things (it writes, moves, "
        "deletes or sends), and I only call tools that read, so I didn't call it and nothing was changed. "
        f"{_REAL}"
    )


def _greeting(words: list[str], tools: Sequence[ToolSpec]) -> str:
    if any(w in ("thanks", "thank", "谢谢") for w in words):
        return "You're welcome!"
    names = ", ".join(f"`{t.name}`" for t in tools[:10]) or "no tools yet"
    return f"Hello! I'm nerve, running on the built-in offline model. I can use: {names}. Ask me something."
