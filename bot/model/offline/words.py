"""Words as the offline model compares them: split in any script, stop words dropped, stems matched."""

from __future__ import annotations

import re

WORD = re.compile(r"[^\W_]+")
"""A word in any script, without underscores: what every part of the offline model splits text on."""

# Words that say nothing about what a tool is for; a question sharing only these with a tool's
# description is no reason to call it.
# fmt: off
STOP = {
    "a", "an", "the", "and", "or", "of", "in", "on", "at", "to", "for", "from", "by", "with", "about",
    "into", "over", "is", "are", "be", "was", "were", "it", "its", "this", "that", "these", "those",
    "what", "which", "who", "how", "when", "where", "why", "do", "does", "did", "can", "could", "would",
    "should", "will", "shall", "may", "me", "my", "i", "you", "your", "we", "our", "us", "please",
    "tell", "show", "give", "get", "gets", "use", "used", "using", "uses", "user", "users", "ask",
    "asks", "tool", "tools", "return", "returns", "data", "info", "information", "given", "specified",
    "current", "like", "any", "some", "there", "here", "if", "not", "no", "yes", "now", "today",
    "right", "just", "also", "only", "than", "then", "as", "so", "but", "one", "all", "each", "via",
    "etc", "status", "result", "results", "value", "values", "based", "target", "whether", "json",
    "object", "short", "long", "question", "example", "default", "such", "first", "pick", "either",
}
# fmt: on


def stem(word: str) -> str:
    """A crude stem, enough to match "running" with "run" and "files" with "file"."""
    for suffix in ("ing", "al", "es", "s", "ed", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2]:
        word = word[:-1]  # running → runn → run
    return word


def related(a: str, b: str) -> bool:
    """Two stems that name the same thing ("environ" and "environment")."""
    short, long = sorted((a, b), key=len)
    return a == b or (len(short) >= 4 and long.startswith(short))


def content_words(text: str) -> list[str]:
    """The stems of the words that carry meaning: no stop words, no numbers, no single letters."""
    words = [w.lower() for w in WORD.findall(text)]
    return [stem(w) for w in words if w not in STOP and not any(c.isdigit() for c in w) and len(w) > 1]
