"""Assembling a streamed chat completion: text deltas, tool-call fragments, usage, finish reason.

Pure, so every odd shape a provider sends can be tested by hand. Fragments split anywhere and
interleave by `index`; calls are handed out only by `completion()`, so nothing acts on a partial one.
Chunks are read leniently as raw JSON: building the SDK's models cost half a millisecond per chunk.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from bot.types import ChatMessage, Completion, ToolCall, Usage


class StreamAssembler:
    """Feed it every chunk of one streamed answer, then ask for the `completion()`."""

    def __init__(self) -> None:
        self._text: list[str] = []
        # Per call index, the fragments of its "id", "name" and "arguments" received so far.
        self._calls: dict[int, defaultdict[str, list[str]]] = {}
        self._last_index: int | None = None
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.chunks = 0

    @property
    def text(self) -> str:
        """The text received so far (what a front end has shown)."""
        return "".join(self._text)

    @property
    def finished(self) -> bool:
        """The model said it was done (`finish_reason`): the answer is whole even if usage is missing."""
        return self.finish_reason is not None

    def feed(self, chunk: object) -> str:
        """Take one `chat.completion.chunk` (parsed JSON); returns its new text ("" when none)."""
        self.chunks += 1
        if not isinstance(chunk, Mapping):
            return ""
        usage = chunk.get("usage")
        # Some servers put usage on every chunk (running totals): the last one wins.
        if isinstance(usage, Mapping):
            self.usage = Usage(
                prompt_tokens=_int(usage.get("prompt_tokens")),
                completion_tokens=_int(usage.get("completion_tokens")),
                cached_tokens=cached_tokens(usage),
            )
        choices = chunk.get("choices")
        text = ""
        for choice in choices if isinstance(choices, list) else ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) not in (0, None):
                continue  # only the first choice is asked for
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                text += _str(delta.get("content"))
                calls = delta.get("tool_calls")
                for fragment in calls if isinstance(calls, list) else ():
                    if isinstance(fragment, Mapping):
                        self._take_fragment(fragment)
            if reason := _str(choice.get("finish_reason")):
                self.finish_reason = reason
        if text:
            self._text.append(text)
        return text

    def _take_fragment(self, fragment: Mapping[str, Any]) -> None:
        given = fragment.get("index")
        call_id = _str(fragment.get("id"))
        if isinstance(given, int):
            index = given
        elif self._last_index is None or (
            call_id and call_id != "".join(self._calls[self._last_index]["id"])
        ):
            # The wire format requires an index; servers that leave it out send each call whole or
            # in order, so a fragment with a new id starts a call and any other continues the last.
            index = len(self._calls)
        else:
            index = self._last_index
        parts = self._calls.setdefault(index, defaultdict(list))
        self._last_index = index
        function = fragment.get("function")
        if not isinstance(function, Mapping):
            function = {}
        pieces = {"id": call_id, "name": function.get("name"), "arguments": function.get("arguments")}
        for key, value in pieces.items():
            if value := _str(value):
                parts[key].append(value)

    def completion(self, new_id: Callable[[], str]) -> Completion:
        """The whole answer; `new_id()` names a call the server sent without an id."""
        calls = tuple(
            ToolCall(
                id="".join(parts["id"]) or new_id(),
                name="".join(parts["name"]),
                arguments="".join(parts["arguments"]),
            )
            for _, parts in sorted(self._calls.items())
            # A fragment with nothing readable in it is noise, not a call.
            if parts["name"] or parts["arguments"]
        )
        content = self.text if self._text or not calls else None
        return Completion(
            message=ChatMessage(role="assistant", content=content, tool_calls=calls), usage=self.usage
        )


def cached_tokens(usage: Mapping[str, Any]) -> int:
    """The prompt tokens a provider read from its cache (`prompt_tokens_details.cached_tokens`)."""
    details = usage.get("prompt_tokens_details")
    return _int(details.get("cached_tokens")) if isinstance(details, Mapping) else 0


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
