"""`nerve forget` and `nerve export`: a person's data rights from the command line, for an operator
acting on that person's request. The person is named by id (`Person.named`): `slack:T0123:U0456`
(workspace and user), `discord:1234` (Discord's user ids are global), `terminal:LOGIN:LOGIN`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from adapters.common.rights import AUDIT_KEPT, forgotten_lines
from adapters.terminal.safe import printable, say, terminal_json
from bot.config import Settings as CoreSettings
from bot.runtime import open_store
from bot.types import Person

Job = Callable[[CoreSettings], Coroutine[Any, Any, int]]


def forget_job(person: Person, *, yes: bool) -> Job:
    """Everything stored about `person`, deleted after a "y" on a terminal (or with --yes)."""

    async def job(settings: CoreSettings) -> int:
        refused = None if yes else await _refused(person)
        if refused is not None:
            return refused
        async with open_store(settings) as store:
            found = await store.forget_person(person, locks=store.turn_lock)
        say(f"Forgot {person.id}:\n" + "\n".join(f"  {line}" for line in forgotten_lines(found)))
        if found.sign_ins:
            say(
                "Their sign-ins were deleted from nerve; a server that keeps its own grant ends it when"
                " the token expires (the chat's forget-me revokes it at the server too)."
            )
        say(AUDIT_KEPT)
        return 0

    return job


async def _refused(person: Person) -> int | None:
    """The exit code when forgetting is not confirmed; off a terminal it needs --yes, never by surprise."""
    if not sys.stdin.isatty():
        say(f"nerve: not forgetting {person.id}: add --yes to forget without asking", sys.stderr)
        return 2
    question = (
        f"Delete everything stored about {person.id} (memories, private conversations, sign-ins;"
        " their messages in shared threads replaced by a note)? This cannot be undone. [y/N] "
    )
    answer = await asyncio.to_thread(input, printable(question))
    if answer.strip().lower() in ("y", "yes"):
        return None
    sys.stderr.write("nerve: nothing deleted\n")
    return 1


def export_job(person: Person, output: Path | None) -> Job:
    """Everything stored about `person` as one JSON document, on stdout or into `output` (readable by
    its owner only: it holds that person's messages)."""

    async def job(settings: CoreSettings) -> int:
        async with open_store(settings) as store:
            document = await store.export_person(person)
        if output is None:
            sys.stdout.write(terminal_json(document) + "\n")
            return 0
        text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        await asyncio.to_thread(_write_private, output, text)
        say(f"Wrote everything stored about {person.id} to {output}", sys.stderr)
        return 0

    return job


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
