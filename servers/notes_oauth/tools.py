"""The notes tools, answering for whoever the bearer token says signed in.

Each call is logged as one line `call <tool> by <user>`, on stderr and in the --log file, so a test
can check whose identity a call carried. The tools check their scope again although the gate
already did: a tool must never act on a token that was not meant for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server import MCPServer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from servers.notes_oauth import scopes
from servers.notes_oauth.store import NotesStore

MAX_NOTE_LENGTH = 2000


class CallLog:
    """Where `call <tool> by <user>` lines go: stderr always, a file when --log names one."""

    def __init__(self, path: Path | None) -> None:
        self._path = path

    def record(self, tool: str, user: str) -> None:
        line = f"call {tool} by {user}"
        print(line, file=sys.stderr, flush=True)
        if self._path is not None:
            with self._path.open("a", encoding="utf-8") as file:
                file.write(line + "\n")


def _caller(tool: str, log: CallLog) -> str:
    """The signed-in person behind this call, once their token is known to allow `tool`."""
    token = get_access_token()
    if token is None or not token.subject:
        raise ToolError("no signed-in person: this server only answers requests with a bearer token")
    missing = scopes.missing_scopes(tool, token.scopes)
    if missing:
        raise ToolError(f"{tool} needs the scope {' '.join(missing)}; sign in again granting it")
    log.record(tool, token.subject)
    return token.subject


def build_notes_server(store: NotesStore, log: CallLog) -> MCPServer:
    server = MCPServer(
        "notes",
        instructions="Personal notes of the signed-in person. Each person sees only their own notes.",
        log_level="WARNING",
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def whoami() -> str:
        """The name of the person signed in to Notes."""
        return _caller("whoami", log)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def list_notes() -> list[str]:
        """Your notes, oldest first."""
        return list(store.state.notes.get(_caller("list_notes", log), []))

    @server.tool(
        annotations=ToolAnnotations(destructive_hint=False, idempotent_hint=False, open_world_hint=False)
    )
    async def add_note(text: str) -> str:
        """Add a note to your notes."""
        user = _caller("add_note", log)
        cleaned = text.strip()
        if not cleaned:
            raise ToolError("the note is empty; give the text to keep")
        if len(cleaned) > MAX_NOTE_LENGTH:
            raise ToolError(f"a note holds at most {MAX_NOTE_LENGTH} characters; this one has {len(cleaned)}")
        mine = store.state.notes.setdefault(user, [])
        mine.append(cleaned)
        await store.save()
        return f"Saved. You have {len(mine)} notes."

    @server.tool(
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False)
    )
    async def delete_all_notes() -> str:
        """Delete all your notes. Needs the notes:admin scope."""
        user = _caller("delete_all_notes", log)
        deleted = len(store.state.notes.pop(user, []))
        await store.save()
        return f"Deleted {deleted} notes."

    return server
