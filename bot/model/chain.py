"""The primary model and its fallbacks: a request the primary cannot answer goes to the next model.

Only failures a different service can cover move on (unreachable, timed out, 5xx, a 429 asking for
a wait past the turn's budget), and only before any of the answer was shown: a stream cut after its
first words ends the turn as it always did (`StreamCut`), or the person would read two answers.
Each model has a circuit (`ModelCircuit`), so an outage costs one timeout, not one per turn.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from bot.config import Settings
from bot.errors import ImagesRefused, LLMError, LLMRateLimited, LLMUnavailable
from bot.model.circuit import DEFAULT_COOL_DOWN, ModelCircuit
from bot.model.concurrency import ConcurrencyLimits
from bot.model.models import ModelList
from bot.seams import LLM
from bot.types import ChatMessage, Completion, Progress, ToolSpec, TurnEvent

if TYPE_CHECKING:
    from bot.model.client import OpenAILLM

logger = logging.getLogger(__name__)

# The failures another model can answer instead. A refused key, an unknown model, a prompt too long
# or images refused are this model's own answer to this request: the next one is not asked.
FALLBACK_ERRORS: tuple[type[LLMError], ...] = (LLMUnavailable, LLMRateLimited)


@dataclass(frozen=True, slots=True)
class ChainLink:
    """One model of the chain: its name, its client, and its circuit (shared by every view)."""

    name: str
    llm: LLM
    circuit: ModelCircuit


class ModelChain:
    """The `LLM` seam over the configured models, tried in order; `choose` starts at another one."""

    def __init__(self, links: Sequence[ChainLink]) -> None:
        if not links:
            raise ValueError("a model chain needs at least one model")
        self.links = tuple(links)

    @classmethod
    def of(
        cls,
        models: Sequence[tuple[str, LLM]],
        *,
        cool_down: float = DEFAULT_COOL_DOWN,
        clock: Callable[[], float] = time.monotonic,
    ) -> ModelChain:
        return cls(
            [ChainLink(name, llm, ModelCircuit(cool_down=cool_down, clock=clock)) for name, llm in models]
        )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(link.name for link in self.links)

    def choose(self, name: str | None) -> ModelChain:
        """The chain starting at model `name` (a place's own), the others after it in their order."""
        if name is None or name == self.links[0].name:
            return self
        first = [link for link in self.links if link.name == name]
        if not first:
            raise KeyError(name)
        return ModelChain([*first, *(link for link in self.links if link.name != name)])

    async def complete(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], progress: Progress
    ) -> Completion:
        """The first model that answers; each one's own retries run before the next is asked."""
        failed: list[tuple[str, LLMError]] = []
        skipped: list[str] = []
        for index, link in enumerate(self.links):
            verdict = link.circuit.admit()
            last = link is self.links[-1]
            if verdict == "skip":
                if failed or index < len(self.links) - 1:
                    skipped.append(link.name)
                    continue
                # Every model is cooling down: the first is asked anyway, better than no answer at all.
                link, verdict = self.links[0], "probe"
                skipped = [name for name in skipped if name != link.name]
            # The person sees an answer, not the outage: a model with another behind it retries quietly.
            told = progress if last else _quiet(progress)
            try:
                completion = await link.llm.complete(messages, tools, told)
            except FALLBACK_ERRORS as exc:
                link.circuit.failed()
                failed.append((link.name, exc))
                if len(self.links) == 1:
                    raise  # one model: its failure is the turn's, as it always was
                logger.warning(
                    "model %s failed%s: %s; skipping it for %.0f s",
                    link.name,
                    " again" if verdict == "probe" else "",
                    exc.message,
                    link.circuit.cool_down,
                )
                continue
            except ImagesRefused as refused:
                link.circuit.released()
                # The refusal is this model's, remembered under its name (`bot.files.vision`).
                refused.model = refused.model or link.name
                raise
            except BaseException:
                link.circuit.released()
                raise
            link.circuit.succeeded()
            if instead := [*skipped, *(name for name, _ in failed)]:
                logger.info("model %s answered in place of %s", link.name, ", ".join(instead))
            elif verdict == "probe":
                logger.info("model %s answers again", link.name)
            return replace(completion, model=link.name)
        # Every model failed: the last failure is the turn's, naming the models tried before it.
        name, error = failed[-1]
        if len(failed) == 1:
            raise error
        tried = ", ".join(f"{n} ({e.headline or e.message})" for n, e in failed[:-1])
        raise type(error)(
            f"{error.message} (model {name}; also failed: {tried})",
            retry_after=error.retry_after,
            headline=error.headline,
        )


def clients_of(
    models: ModelList,
    settings: Settings,
    *,
    sleep: Callable[[float], Awaitable[None]] | None = None,
    limits: ConcurrencyLimits | None = None,
) -> list[OpenAILLM]:
    """One client per configured model, each with its own endpoint, key, timeout and retries."""
    # Imported only when needed: the client library adds a second to every start-up.
    from bot.model.client import OpenAILLM

    return [
        OpenAILLM(
            name=spec.name,
            model=spec.model,
            base_url=spec.base_url,
            api_key=spec.api_key.get_secret_value() if spec.api_key is not None else None,
            timeout=spec.timeout,
            max_retries=spec.max_retries,
            stream=settings.nerve_llm_stream,
            stream_stall=settings.nerve_llm_stream_stall,
            sleep=sleep or asyncio.sleep,
            limits=limits,
        )
        for spec in models.specs
    ]


def _quiet(progress: Progress) -> Progress:
    """`progress` without the retry notices: the next model answers if these retries fail."""

    async def told(event: TurnEvent) -> None:
        if event.kind != "retrying":
            await progress(event)

    return told
