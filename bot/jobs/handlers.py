"""What a job runs: an async function the front end registers under a job name."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

# `async def handler(**payload: str) -> None`, called with the payload given to `enqueue` as keyword
# arguments (e.g. `async def answer(*, event_id: str) -> None`). It runs in whichever process's
# worker takes the job. An exception it raises marks the job failed, and the job is not run again:
# the handler owns telling the person. A job cut off by a drain, or whose process died, is run again
# from the start by another process, so a handler must be safe to run again after a partial run.
JobHandler = Callable[..., Awaitable[None]]
