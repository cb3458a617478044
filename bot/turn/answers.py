"""How a turn's answer is put in words: its notices and warnings added, stored, or a failure told.

Apart from the loop because a turn ends the same way wherever it ends: after the model's last round,
at a stop (the loop's, or a turn resumed after its person's word), when the model failed or the turn's
time ran out, or for a re-delivered message whose answer is stored already.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from bot.errors import LLMError, TurnOverdue
from bot.memory.tools import remembered
from bot.observe import metrics
from bot.seams import Store, ToolHost
from bot.text.render import truncate
from bot.turn.calls import CallOutcome, TurnState, stored_attachment, stored_results
from bot.turn.failures import model_failure, overdue
from bot.types import AgentReply, ChatMessage, ConversationKey, Incoming, Platforms, Usage

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnAnswers:
    """The answers of every turn: `store` keeps them, `host` says which servers are still starting."""

    store: Store
    host: ToolHost
    # How a person starts afresh on each platform, for the sentence of a failed model.
    platforms: Platforms
    # Calls with invalid arguments a turn may make before it stops (`AgentConfig.max_argument_errors`).
    max_argument_errors: int

    def stop_reason(self, outcomes: Sequence[CallOutcome], state: TurnState) -> str | None:
        """A plain answer when going on would only guess in circles (S10)."""
        refused = [o for o in outcomes if o.outcome == "refused_unavailable"]
        if refused:
            names = sorted({o.message.name or "a tool" for o in refused})
            told = " ".join(
                _one_line(state.failed[name].for_people()) for name in names if name in state.failed
            )
            return f"Sorry — I could not finish this answer. {told}".strip()
        state.argument_errors += sum(1 for o in outcomes if o.outcome == "fix_arguments")
        if state.argument_errors > self.max_argument_errors:
            last = next(o.failure for o in reversed(outcomes) if o.outcome == "fix_arguments" and o.failure)
            return (
                "Sorry — I could not call the tools with valid arguments after several tries. "
                + _one_line(last.for_people())
            )
        return None

    async def finish(
        self, key: ConversationKey, text: str, state: TurnState, usage: Usage, *, cut_short: bool = False
    ) -> AgentReply:
        text = text.strip() or "The model returned an empty answer. Please rephrase the question."
        if state.notices:
            text = "\n".join(state.notices) + "\n\n" + text
        if missing := [failure for name, failure in state.failed.items() if name not in text]:
            text += "\n\n" + "\n".join(f"⚠️ {_one_line(failure.for_people())}" for failure in missing)
        if starting := self.host.starting():
            text += f"\n\n⏳ {', '.join(starting)}: still starting, so not used for this answer."
        saved = remembered(state.attachments)
        if saved:
            text += "\n\n" + "\n".join(
                f"🧠 Remembered for {memory.owner}: {memory.text}"
                + (f" ({memory.note})" if memory.note else "")
                for memory in saved
            )
        await self.store.append(key, [ChatMessage(role="assistant", content=text)])
        if state.model is not None:
            logger.info("answered by model %s", state.model)
        return AgentReply(
            text=text,
            attachments=tuple(state.attachments),
            usage=usage,
            cut_short=cut_short,
            remembered=saved,
            model=state.model,
        )

    async def stored_answer(self, incoming: Incoming) -> AgentReply | None:
        """A re-delivered message whose answer is already stored gets that answer, not a second turn."""
        after = await self.store.messages_after_event(incoming.key, incoming.event_id or "")
        finals = [m for m in after if m.role == "assistant" and not m.tool_calls]
        if not finals:
            return None
        attachments = tuple(stored_attachment(call, m) for call, m in stored_results(after))
        return AgentReply(text=finals[0].content or "", attachments=attachments)

    def ended(self, incoming: Incoming, error: LLMError | TurnOverdue, state: TurnState) -> AgentReply:
        """A turn the model failed or whose time ran out: a plain sentence with the tool results so far.

        Not stored: a re-delivery tries again, and the model never reads the apology back as its own."""
        if isinstance(error, LLMError):
            logger.warning("model call failed for %s: %s", incoming.key, error.message)
            text = model_failure(error, incoming, self.platforms.get(incoming.key.platform))
        else:
            logger.warning("turn in %s ran out of time: %s", incoming.key, error.message)
            metrics.turn_outcome("timed_out")
            text = overdue(error)
        text = "\n".join([*state.notices, text])
        return AgentReply(text=text, attachments=tuple(state.attachments), failed=True)


def _one_line(text: str, limit: int = 300) -> str:
    """The first line of a people text, for a sentence inside the answer."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return truncate(line, limit)[0]
