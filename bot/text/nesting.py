"""JSON from outside, read with a bound on how deeply it nests.

`json.loads` and any walk over its value recurse per level and fail near 1,000 levels, so anything
deeper than `MAX_DEPTH` is refused or handled as text here, at the edge.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 64

# Every byte but brackets is dropped, and `{}` become `[]`: matched pairs nest alike, whatever their kind.
_ONLY_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


class TooDeep(ValueError):
    """JSON nested deeper than the limit: a ValueError, so callers that treat bad JSON as text still do."""

    def __init__(self) -> None:
        super().__init__(f"nested deeper than {MAX_DEPTH} levels")


def loads(
    text: str,
    *,
    parse_constant: Callable[[str], Any] | None = None,
    parse_float: Callable[[str], Any] | None = None,
) -> Any:
    """`json.loads`, but JSON nested deeper than `MAX_DEPTH` raises `TooDeep` instead of recursing."""
    try:
        value = json.loads(text, parse_constant=parse_constant, parse_float=parse_float)
    except RecursionError:
        raise TooDeep from None
    if isinstance(value, dict | list) and _text_deeper_than(text, MAX_DEPTH):
        raise TooDeep
    return value


def _text_deeper_than(text: str, limit: int) -> bool:
    """Without recursion: with escapes and strings dropped, each pass removes the innermost bracket
    pairs; every step runs in C, so this costs about one parse."""
    if text.count("[") + text.count("{") <= limit:
        return False
    plain = text.replace("\\\\", "").replace('\\"', "") if "\\" in text else text
    outside = "".join(plain.split('"')[::2])
    brackets = outside.encode("utf-8", "surrogatepass").translate(_ONLY_BRACKETS, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return bool(brackets)
