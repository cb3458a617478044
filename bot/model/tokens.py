"""Offline token estimates, for keeping a request inside the model's context window.

No tokenizer is loaded (tiktoken downloads its tables, and a local model's is unknown): estimates from
character classes, within about ±15%. `ContextTooLong` from the server has the final word.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence

from bot.types import ChatMessage, ToolSpec

# Each message is wrapped in role and separator tokens; OpenAI's own guidance counts 3–4.
MESSAGE_OVERHEAD = 4
# Every reply is primed with `<|start|>assistant<|message|>`.
REPLY_PRIMING = 3
TOOL_CALL_OVERHEAD = 3
# Tools are rendered into the system prompt as a namespace of function signatures.
TOOLS_OVERHEAD = 12
TOOL_OVERHEAD = 8
# An image part, whatever its size: images are scaled to a bounded side before they are sent, and
# providers count such an image at roughly a thousand tokens (OpenAI ~765 at high detail, Anthropic
# up to ~1,600).
IMAGE_TOKENS = 1000

_LETTERS_AND_SPACE = re.compile(r"[A-Za-z ]")
_DIGITS = re.compile(r"[0-9]")
_ASCII_OTHER = re.compile(r"[\x00-\x1f!-/:-@\[-`{-\x7f]")
_CJK = re.compile(r"[\u1100-\u11ff\u2e80-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff00-\uffef]")
_ASTRAL = re.compile(r"[\U00010000-\U0010ffff]")
_CLASSES = (_LETTERS_AND_SPACE, _DIGITS, _ASCII_OTHER, _CJK, _ASTRAL)


@functools.lru_cache(maxsize=8192)
def estimate_tokens(text: str) -> int:
    """Estimated tokens of `text` (0 only for ""): cached, as every round re-estimates the same history."""
    if not text:
        return 0
    # `subn` counts in C; iterating characters in Python is ~20x slower on large tool results.
    letters, digits, punctuation, cjk, astral = (pattern.subn("", text)[1] for pattern in _CLASSES)
    other = len(text) - letters - digits - punctuation - cjk - astral
    estimate = letters / 4.2 + digits / 3 + punctuation * 0.5 + cjk + astral * 1.5 + other * 0.5
    return max(1, math.ceil(estimate))


def estimate_message_tokens(messages: Sequence[ChatMessage]) -> int:
    if not messages:
        return 0
    total = REPLY_PRIMING
    for message in messages:
        texts = (message.content, message.name, message.tool_call_id)
        total += MESSAGE_OVERHEAD + sum(estimate_tokens(text or "") for text in texts)
        total += IMAGE_TOKENS * len(message.images)
        for call in message.tool_calls:
            total += TOOL_CALL_OVERHEAD + sum(map(estimate_tokens, (call.id, call.name, call.arguments)))
    return total


def estimate_tools_tokens(tools: Sequence[ToolSpec]) -> int:
    if not tools:
        return 0
    total = TOOLS_OVERHEAD
    for tool in tools:
        schema = json.dumps(tool.parameters, ensure_ascii=False, separators=(",", ":"))
        total += TOOL_OVERHEAD + sum(map(estimate_tokens, (tool.name, tool.description, schema)))
    return total
