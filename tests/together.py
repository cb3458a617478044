"""Processes started to race: each says "ready", all are released at once with "go", and each prints
a JSON list of what it did. Shared by the tests that prove a claim holds across processes."""

from __future__ import annotations

import asyncio
import json
from typing import Any


async def released_together(processes: list[asyncio.subprocess.Process]) -> list[Any]:
    """What the processes printed, joined; each must end with 0. Killed if the test fails first."""
    done: list[Any] = []
    try:
        for process in processes:
            assert process.stdout is not None
            assert await process.stdout.readline() == b"ready\n"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write(b"go\n")
            await process.stdin.drain()
        for process in processes:
            out, _ = await process.communicate()
            assert process.returncode == 0
            done += json.loads(out)
    finally:
        for process in processes:
            if process.returncode is None:
                process.kill()
                await process.wait()
    return done
