"""A scripted model for loop tests: a list of steps, every request recorded, loud when misused."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.errors import LLMError
from bot.types import ChatMessage, Completion, Progress, ToolCall, ToolSpec, Usage


@dataclass(frozen=True)
class Call:
    """A tool call the script makes; `arguments` is sent as given when it is a string."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Step:
    text: str | None = None
    calls: Sequence[Call] = ()
    error: LLMError | None = None
    usage: Usage | None = None


class ScriptExhausted(AssertionError):
    """The agent called the model more often than the script allows."""


class ScriptedLLM:
    """Answers with the next step; records exactly what the model was sent."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self._steps = list(steps)
        self.requests: list[list[ChatMessage]] = []
        self.tools_seen: list[list[ToolSpec]] = []
        self._counter = 0

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        self.requests.append(list(messages))
        self.tools_seen.append(list(tools))
        if not self._steps:
            raise ScriptExhausted(f"model called {len(self.requests)} times, past the end of its script")
        step = self._steps.pop(0)
        if step.error is not None:
            raise step.error
        calls = []
        for call in step.calls:
            self._counter += 1
            arguments = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            calls.append(ToolCall(id=call.id or f"call_{self._counter}", name=call.name, arguments=arguments))
        message = ChatMessage(role="assistant", content=step.text, tool_calls=tuple(calls))
        return Completion(message=message, usage=step.usage)

    def assert_complete(self) -> None:
        assert not self._steps, f"{len(self._steps)} scripted model steps were never used"

    def last_request(self) -> list[ChatMessage]:
        assert self.requests, "the model was never called"
        return self.requests[-1]
