"""The background work a front end owns: each task is awaited on drain and cancelled on close."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, Protocol


class Spawn(Protocol):
    """Runs a coroutine as a task the front end owns; `name` names the task where it is shown."""

    def __call__(self, work: Coroutine[Any, Any, None], name: str | None = None, /) -> None: ...
