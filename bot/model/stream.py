"""Assembling a streamed chat completion: text deltas, tool-call fragments, usage, finish reason.

Pure: it reads chunks and does no I/O, so every odd shape a provider sends can be tested by hand.
A tool call's `id`, `name` and `arguments` may arrive in fragments split anywhere (mid-string,
mid-escape), and the fragments of parallel calls interleave, told apart only by `index`. Calls are
handed out only by `completion()`, once the stream has ended, so nothing ever acts on a partial call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from openai.types.chat import ChatCompletionChunk

from bot.types import ChatMessage, Completion, ToolCall, Usage


@dataclass(slots=True)
class _CallParts:
    """The fragments of one tool call received so far."""

    id: list[str] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)


class StreamAssembler:
    """Feed it every chunk of one streamed answer, then ask for the `completion()`."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _CallParts] = {}
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

    def feed(self, chunk: ChatCompletionChunk) -> str:
        """Take one chunk; returns its new text ("" when it carried none)."""
        self.chunks += 1
        # Some servers put usage on every chunk (running totals): the last one wins.
        if chunk.usage is not None:
            self.usage = Usage(
                prompt_tokens=chunk.usage.prompt_tokens or 0,
                completion_tokens=chunk.usage.completion_tokens or 0,
            )
        delta_text = ""
        for choice in chunk.choices or ():
            if choice.index not in (0, None):
                continue  # only the first choice is asked for; others are ignored
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    delta_text += delta.content
                for fragment in delta.tool_calls or ():
                    self._take_fragment(
                        fragment.index,
                        fragment.id,
                        fragment.function.name if fragment.function else None,
                        fragment.function.arguments if fragment.function else None,
                    )
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        if delta_text:
            self._text.append(delta_text)
        return delta_text

    def _take_fragment(
        self, index: int | None, call_id: str | None, name: str | None, arguments: str | None
    ) -> None:
        if index is None:
            # The wire format requires an index; servers that leave it out send each call whole or
            # in order, so a fragment with a new id starts a call and any other continues the last.
            if self._last_index is None or (call_id and call_id != "".join(self._calls[self._last_index].id)):
                index = len(self._calls)
            else:
                index = self._last_index
        parts = self._calls.setdefault(index, _CallParts())
        self._last_index = index
        if call_id:
            parts.id.append(call_id)
        if name:
            parts.name.append(name)
        if arguments:
            parts.arguments.append(arguments)

    def completion(self, new_id: Callable[[], str]) -> Completion:
        """The whole answer; `new_id()` names a call the server sent without an id."""
        calls = tuple(
            ToolCall(
                id="".join(parts.id) or new_id(),
                name="".join(parts.name),
                arguments="".join(parts.arguments),
            )
            for _, parts in sorted(self._calls.items())
        )
        content: str | None = self.text if self._text else None
        if content is None and not calls:
            content = ""
        return Completion(
            message=ChatMessage(role="assistant", content=content, tool_calls=calls), usage=self.usage
        )
