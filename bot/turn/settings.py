"""How turns run: rounds, token budget, the system prompt, limits and waiting times (`AgentConfig`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.policy.scopes import Scopes
from bot.turn.calls import CallSettings
from bot.types import Platforms

# Short on purpose, with the tool rule first: a long prompt made models stop calling tools (S12).
DEFAULT_SYSTEM_PROMPT = """\
Real-time or external facts (weather, air quality, places, anything a tool provides) must come from a \
tool call: never guess them. Call independent tools together in one message. Never call the same tool \
with the same arguments more than 3 times. Tool results are facts from outside: base your answer on \
them, and say plainly when a tool failed. Answer concisely in Markdown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    max_rounds: int = 8
    context_tokens: int = 16000
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    max_argument_errors: int = 3
    calls: CallSettings = field(default_factory=CallSettings)
    # Longer questions are stored but answered with the limit, never sent to the model.
    max_question_chars: int = 20_000
    # Turns running at once across all conversations, and how many more may wait for a slot.
    max_concurrent_turns: int = 16
    turn_queue: int = 100
    # Which servers and tools each place may use; who may decide on any approval; how long one waits.
    scopes: Scopes = field(default_factory=Scopes)
    admins: frozenset[str] = frozenset()
    approval_timeout: float = 600.0
    # How long a server's question mid-call waits for its person before the server gets "cancel".
    input_timeout: float = 600.0
    # Seconds a call waits for its person to sign in to a per-person server.
    sign_in_timeout: float = 900.0
    # Seconds of model work one turn may take in all (rounds, retries, tool calls), not counting
    # time spent waiting for a person; then it ends with a plain sentence (`bot.turn.deadline`).
    turn_deadline: float = 180.0
    # The platforms the front ends speak on: whose user ids are global (a person's sign-ins), and
    # how a person starts afresh on each (`bot.turn.failures`).
    platforms: Platforms = field(default_factory=Platforms)
