"""One model call of a round, within the context's token budget, compressed and retried once if too long.

Apart from the loop because it keeps what every turn learns from the model's answers: how the server's
count of a request's tokens compares with our offline estimate, so each next request is cut to fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.errors import ContextTooLong
from bot.files.desk import TurnFiles
from bot.model.tokens import estimate_message_tokens, estimate_tools_tokens
from bot.seams import LLM
from bot.turn.context import Budget, build_request
from bot.turn.prompt import TurnPrompt
from bot.types import ChatMessage, Completion, Progress, ToolSpec, TurnEvent


@dataclass(eq=False, kw_only=True)
class ModelCalls:
    """The model calls of every turn, each sized to `context_tokens`; shared by every conversation."""

    context_tokens: int
    # How the server's token count compares with our offline estimate, learnt from each answer.
    _token_scale: float = field(default=1.0, init=False)

    async def complete(
        self,
        llm: LLM,
        prompt: TurnPrompt,
        history: list[ChatMessage],
        tools: Sequence[ToolSpec],
        progress: Progress,
        files: TurnFiles | None = None,
    ) -> Completion:
        """One model call within the token budget; on a context-length error, compress and retry once."""
        budget = Budget(
            context_tokens=self.context_tokens,
            tools_tokens=estimate_tools_tokens(tools),
            scale=self._token_scale,
        )

        def request_of(squeeze: bool) -> list[ChatMessage]:
            # The files' text and images are put in each time: a refusal of images composes anew.
            messages = files.compose(history) if files is not None else history
            return build_request(prompt.system, messages, budget, squeeze=squeeze, note=prompt.note)

        async def ask(request: list[ChatMessage], squeeze: bool) -> Completion:
            if files is None:
                return await llm.complete(request, tools, progress)
            return await files.complete(llm, request, tools, progress, lambda: request_of(squeeze))

        request = request_of(False)
        try:
            completion = await ask(request, False)
        except ContextTooLong:
            await progress(
                TurnEvent(kind="notice", message="conversation too long for the model, compressing…")
            )
            request = request_of(True)
            completion = await ask(request, True)
        if completion.usage and completion.usage.prompt_tokens:
            estimated = estimate_message_tokens(request) + budget.tools_tokens
            # Learn how our offline estimate compares with the server's own count.
            self._token_scale = min(4.0, max(0.5, completion.usage.prompt_tokens / max(1, estimated)))
        return completion
