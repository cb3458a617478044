"""Building what the model sees each round (S8, S9, S11).

The system prompt, tools and the current turn always; earlier turns within a token budget. A message
with tool calls is never separated from its tool messages: some APIs answer 400.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.model.tokens import estimate_message_tokens, estimate_tokens
from bot.text.nesting import MAX_DEPTH, TooDeep, loads
from bot.text.turn_note import CARRIERS, with_note, with_summary
from bot.types import ChatMessage, ToolCall

COMPRESS_AT = 0.8
# Compression goes well below the line that starts it, so it happens every few turns, not each one.
COMPRESS_TO = 0.4
SUMMARY_LINE_CHARS = 160
SUMMARY_MAX_LINES = 30
# What the model is shown of a result nested too deep to walk: its start, as plain text.
DEEP_RESULT_CHARS = 1000


def anchor(tool_name: str, *, is_error: bool) -> str:
    """The certainty anchor (S11): marks a tool result as external fact, not the model's own words."""
    if is_error:
        return f'Tool "{tool_name}" failed. The error follows:'
    return f'Tool "{tool_name}" ran successfully. Its raw result follows:'


def as_json_text(content: str) -> str:
    """Tool output as JSON text: as is when it parses, else a JSON string; too-deep JSON flattened (S15)."""
    try:
        loads(content)
    except TooDeep:
        note = (
            f"the result is nested deeper than {MAX_DEPTH} levels, so it is shown as plain text, "
            f"cut to its first {min(DEEP_RESULT_CHARS, len(content))} of {len(content)} characters"
        )
        return json.dumps({"result": content[:DEEP_RESULT_CHARS], "_note": note}, ensure_ascii=False)
    except ValueError:
        return json.dumps(content, ensure_ascii=False)
    return content


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """How many tokens a request may use, and what one tool result may take of it."""

    context_tokens: int
    tools_tokens: int = 0
    scale: float = 1.0

    def fits(self, tokens: int, *, share: float = COMPRESS_AT) -> bool:
        return (tokens + self.tools_tokens) * self.scale <= self.context_tokens * share


def _shrink_json(value: Any, depth: int = 0) -> Any:
    """Key fields of a big JSON value: scalars whole, long strings cut, lists sampled, depth capped."""
    if isinstance(value, dict):
        if depth >= 2:
            return f"{{…{len(value)} fields}}"
        return {key: _shrink_json(item, depth + 1) for key, item in list(value.items())[:25]}
    if isinstance(value, list):
        if depth >= 2:
            return f"[…{len(value)} items]"
        head = [_shrink_json(item, depth + 1) for item in value[:5]]
        return [*head, f"…{len(value) - 5} more items"] if len(value) > 5 else head
    if isinstance(value, str) and len(value) > 200:
        return value[:200] + "…"
    return value


def cut_result(content: str, max_tokens: int) -> str:
    """A result that fits `max_tokens`, as valid JSON text, saying what was left out (S9)."""
    if estimate_tokens(content) <= max_tokens:
        return content
    max_chars = max_tokens * 3
    try:
        shrunk: Any = _shrink_json(loads(content))
    except ValueError:
        shrunk = content[:max_chars] + "…"
    note = f"result cut to its key fields for the model; the full {len(content)} characters are stored"
    text = json.dumps({"result": shrunk, "_note": note}, ensure_ascii=False)
    if estimate_tokens(text) > max_tokens:
        text = json.dumps({"result": content[:max_chars] + "…", "_note": note}, ensure_ascii=False)
    return text


def _merge_user_runs(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """One user message per run of them: a killed turn leaves a question unanswered, and some chat
    templates refuse two user messages in a row."""
    out: list[ChatMessage] = []
    for message in messages:
        if message.role == "user" and out and out[-1].role == "user":
            out[-1] = replace(
                out[-1],
                content=f"{out[-1].content or ''}\n\n{message.content or ''}",
                files=(*out[-1].files, *message.files),
                images=(*out[-1].images, *message.images),
            )
        else:
            out.append(message)
    return out


def _turns(history: Sequence[ChatMessage]) -> list[list[ChatMessage]]:
    """Split history at user messages: a turn is a user message and everything that answered it."""
    turns: list[list[ChatMessage]] = []
    for message in history:
        if message.role == "user" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return turns


def _present_tool_messages(history: Sequence[ChatMessage], max_result_tokens: int) -> list[ChatMessage]:
    """Anchor each result, cut big ones, and replace superseded ones (S9)."""
    calls = {call.id: call for message in history for call in message.tool_calls}
    superseded = _superseded(history, calls)
    out: list[ChatMessage] = []
    for index, message in enumerate(history):
        if message.role != "tool":
            out.append(message)
            continue
        name = _tool_name(message, calls)
        if index in superseded:
            note = f"an older result of {name} (arguments {superseded[index]}), replaced by a later call"
            body = json.dumps(
                {"superseded": note + "; call it again if you need this one"}, ensure_ascii=False
            )
        else:
            body = _shown(message.content or "", max_result_tokens)
        out.append(replace(message, content=f"{anchor(name, is_error=message.is_error)}\n{body}"))
    return out


@functools.lru_cache(maxsize=256)
def _shown(content: str, max_tokens: int) -> str:
    """A result as the model is shown it: cached, as every round shows (and weighs) the same ones."""
    return cut_result(as_json_text(content), max_tokens)


def _superseded(history: Sequence[ChatMessage], calls: dict[str, ToolCall]) -> dict[int, str]:
    """The results sent as a one-line marker, each with its call's arguments.

    A result of an earlier turn is superseded when the next round that has results starts with the
    same tool (calls of one round are parallel and distinct); the current turn's results are active
    context and stay whole. It is replaced at once, in the request that carries the result superseding
    it: that rewrites the request from the old result on, and a provider's cache loses what follows,
    but keeping superseded results whole for longer (to replace them in batches) sent more tokens in
    all for the same number uncached, which costs more where cached tokens are billed at all.
    """
    current_turn = max((i for i, m in enumerate(history) if m.role == "user"), default=0)
    rounds: list[list[int]] = []
    for index, message in enumerate(history):
        if message.role == "assistant" and message.tool_calls:
            rounds.append([])
        elif message.role == "tool" and rounds:
            rounds[-1].append(index)
    out: dict[int, str] = {}
    for this_round, next_round in itertools.pairwise([r for r in rounds if r]):
        following = _tool_name(history[next_round[0]], calls)
        for index in this_round:
            if index < current_turn and _tool_name(history[index], calls) == following:
                call = calls.get(history[index].tool_call_id or "")
                out[index] = call.arguments if call else "{}"
    return out


def _tool_name(message: ChatMessage, calls: dict[str, ToolCall]) -> str:
    """The tool message's own name first: some servers reuse call ids across rounds."""
    if message.name:
        return message.name
    call = calls.get(message.tool_call_id or "")
    return call.name if call else "tool"


def _summary_line(turn: Sequence[ChatMessage]) -> str:
    """One earlier turn as one line: what was asked, what was answered, which tools ran."""
    asked = (turn[0].content or "").replace("\n", " ")[:SUMMARY_LINE_CHARS]
    answers = [m.content for m in turn if m.role == "assistant" and not m.tool_calls and m.content]
    answered = (answers[-1] if answers else "(no answer)").replace("\n", " ")[:SUMMARY_LINE_CHARS]
    tools = sorted({call.name for m in turn for call in m.tool_calls})
    used = f" [tools: {', '.join(tools)}]" if tools else ""
    return f"- user: {asked} → you: {answered}{used}"


def _summary(lines: Sequence[str]) -> str:
    """The compressed turns, newest kept: the summary itself must stay bounded too."""
    shown = lines[-SUMMARY_MAX_LINES:]
    omitted = len(lines) - len(shown)
    head = f"- ({omitted} earlier turns omitted)\n" if omitted else ""
    return "Summary of the earlier conversation (compressed to save space):\n" + head + "\n".join(shown)


def build_request(
    system_prompt: str,
    history: Sequence[ChatMessage],
    budget: Budget,
    *,
    squeeze: bool = False,
    note: str = "",
) -> list[ChatMessage]:
    """The messages for one model call; `squeeze` (on a context-length error) keeps the current turn.

    The turn's `note` (what changes each turn: the time, the person's memories) ends the request: the
    turn's message in its first request, the latest result after tools answered, so everything
    before it is as the previous request had it (`bot.text.turn_note`)."""
    # One tool result may take an eighth of the context (half that when squeezing).
    result_tokens = max(300, budget.context_tokens // 8)
    presented = _present_tool_messages(history, result_tokens // (2 if squeeze else 1))

    turns = _turns(_merge_user_runs(presented))
    current, earlier = (turns[-1], turns[:-1]) if turns else ([], [])
    if note and current and current[-1].role in CARRIERS:
        current = [*current[:-1], replace(current[-1], content=with_note(current[-1].content or "", note))]
    elif note:  # no message to carry it: the end of the system prompt does
        system_prompt = f"{system_prompt}\n\n{note}"
    system = ChatMessage(role="system", content=system_prompt)
    fixed = estimate_message_tokens([system])
    kept_from = len(earlier) if squeeze else _kept_from(earlier, current, fixed, budget)
    rest = [*(m for turn in earlier[kept_from:] for m in turn), *current]
    if kept_from:
        rest = _with_summary(rest, _summary([_summary_line(turn) for turn in earlier[:kept_from]]))
    return [system, *rest]


def _kept_from(
    earlier: Sequence[Sequence[ChatMessage]], current: Sequence[ChatMessage], system: int, budget: Budget
) -> int:
    """The first earlier turn sent whole; those before it are summarised.

    The conversation is replayed turn by turn: whenever a request would pass the safety line, the
    oldest turns are summarised until it is down to `COMPRESS_TO` of the context. Those turns then
    stay summarised and the rest whole for the next turns, whose requests start as the previous ones
    did, until the line is passed again: a provider's prompt cache keeps them in between, and a
    compression, which rewrites the request after the system prompt, happens every few turns."""
    sizes = [estimate_message_tokens(turn) for turn in earlier]
    sums = list(itertools.accumulate(sizes, initial=0))
    lines = list(itertools.accumulate((estimate_tokens(_summary_line(t)) for t in earlier), initial=0))
    kept = 0
    for now in range(len(earlier) + 1):
        # The request when turn `now` was the current one (the last: this request itself).
        head = system + (sizes[now] if now < len(earlier) else estimate_message_tokens(current))

        def tokens(first: int, head: int = head, now: int = now) -> int:
            return head + lines[first] - lines[max(0, first - SUMMARY_MAX_LINES)] + sums[now] - sums[first]

        if budget.fits(tokens(kept)):
            continue
        while kept < now and not budget.fits(tokens(kept), share=COMPRESS_TO):
            kept += 1
    return kept


def _with_summary(messages: list[ChatMessage], summary: str) -> list[ChatMessage]:
    """`summary` at the start of the first message after the system prompt (the person's).

    Not in the system prompt: that one stays byte-identical for every request of the conversation, so
    a provider's cache keeps it and the tools whatever is compressed. Not a message of its own either:
    some chat templates reject a second system message or two user messages in a row."""
    if not messages or messages[0].role != "user":
        return [ChatMessage(role="user", content=with_summary(None, summary)), *messages]
    return [replace(messages[0], content=with_summary(messages[0].content or "", summary)), *messages[1:]]
