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
from dataclasses import replace
from pathlib import Path
from typing import Any

from adapters.common.rights import AUDIT_KEPT, forgotten_lines
from adapters.terminal.safe import printable, say, terminal_json
from bot.config import Settings as CoreSettings
from bot.errors import NerveError
from bot.runtime import load_mcp_config, open_store, sign_ins_for
from bot.store.base import ConversationStore
from bot.types import Person

Job = Callable[[CoreSettings], Coroutine[Any, Any, int]]


def forget_job(person: Person, *, yes: bool) -> Job:
    """Everything stored about `person`, deleted after a "y" on a terminal (or with --yes)."""

    async def job(settings: CoreSettings) -> int:
        refused = None if yes else await _refused(person)
        if refused is not None:
            return refused
        async with open_store(settings) as store:
            revoked = await _revoke(settings, store, person)
            found = await store.forget_person(person, locks=store.turn_lock)
        found = replace(found, sign_ins=found.sign_ins + revoked)
        say(f"Forgot {person.id}:\n" + "\n".join(f"  {line}" for line in forgotten_lines(found)))
        say(AUDIT_KEPT)
        return 0

    return job


async def _revoke(settings: CoreSettings, store: ConversationStore, person: Person) -> int:
    """Their tokens revoked at the servers that support it and forgotten, as the running nerve does;
    where these settings cannot reach the servers (no servers file, NERVE_SECRET_KEY or
    NERVE_PUBLIC_URL), they are only deleted, and stderr says so."""
    try:
        servers = load_mcp_config(settings.nerve_mcp_config, platforms=settings.platforms).servers
        sign_ins = sign_ins_for(settings, servers, store, None)
    except (NerveError, OSError) as exc:
        if await store.connections_of(person.id):
            reason = exc.message if isinstance(exc, NerveError) else str(exc)
            say(f"nerve: their sign-ins are deleted, not revoked at the servers: {reason}", sys.stderr)
        return 0
    if sign_ins is None:
        return 0
    revoked = 0
    for connection in await sign_ins.connections(person.id):
        revoked += await sign_ins.disconnect(connection.server, person.id)
    return revoked


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
