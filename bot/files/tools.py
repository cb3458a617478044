"""The built-in tools `read_attachment` and `search_attachment`: the model reads the rest of a shared
file that was cut to fit, in this turn or a later one.

In-process, like the memory tools, because only the core knows which conversation a call is for
(`CallContext.incoming`): a file is found only within the turn's own conversation, so an id from
another thread, another person's DM, is not found whoever names it. Offered only in a conversation
that has files (`offered_in`, from what the turn loaded: `mark`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Protocol

from bot.files.fit import lines, search
from bot.types import CallContext, ConversationKey, Incoming, ToolResult, ToolSpec
from bot.types.files import StoredFile

# Not "files": that is what people name a filesystem MCP server, and a built-in's name is reserved.
FILES_SERVER = "attachments"
# Matches a search returns at most.
SEARCH_LIMIT = 20
# Threads whose conversation has files, as far as this process knows; bounded, oldest dropped first.
MARKED_THREADS = 10_000

_ID = {"type": "string", "description": "the file's id, as in [file f_…] in the conversation"}
SPECS = (
    ToolSpec(
        name="read_attachment",
        description=(
            "Read lines of a file shared in this conversation (numbered from 1), e.g. the part left "
            "out when it was too long to show whole."
        ),
        parameters={
            "type": "object",
            "properties": {
                "attachment_id": _ID,
                "start_line": {"type": "integer", "minimum": 1},
                "end_line": {"type": "integer", "minimum": 1},
            },
            "required": ["attachment_id", "start_line", "end_line"],
            "additionalProperties": False,
        },
        server=FILES_SERVER,
        original_name="read_attachment",
    ),
    ToolSpec(
        name="search_attachment",
        description="Find the lines of a file shared in this conversation that contain the words of a query.",
        parameters={
            "type": "object",
            "properties": {"attachment_id": _ID, "query": {"type": "string", "minLength": 1}},
            "required": ["attachment_id", "query"],
            "additionalProperties": False,
        },
        server=FILES_SERVER,
        original_name="search_attachment",
    ),
)
NAMES = frozenset(spec.name for spec in SPECS)


class FileShelf(Protocol):
    async def file_in(self, key: ConversationKey, file_id: str) -> StoredFile | None: ...


class FileTools:
    """The two tools over the stored files, for whichever turn calls them."""

    def __init__(self, shelf: FileShelf, *, context_tokens: int) -> None:
        self._shelf = shelf
        # What one answer may hold: the loop cuts a tool result past an eighth of the context
        # (`bot.turn.context`), at worst about half a token per character (numbers and commas).
        self._max_chars = int(max(300, context_tokens // 8) * 1.6)
        self._with_files: dict[str, None] = {}

    def list_tools(self) -> list[ToolSpec]:
        return list(SPECS)

    def starting(self) -> list[str]:
        return []

    def mark(self, key: ConversationKey, has_files: bool) -> None:
        """What a turn found: whether its conversation has files (so the tools are offered there)."""
        name = str(key)
        self._with_files.pop(name, None)
        if has_files:
            self._with_files[name] = None
            while len(self._with_files) > MARKED_THREADS:
                del self._with_files[next(iter(self._with_files))]

    def offered_in(self, incoming: Incoming) -> bool:
        return str(incoming.key) in self._with_files

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        incoming = context.incoming if context is not None else None
        if incoming is None:
            return _refused("files are only available in a conversation", "execution")
        file_id = str(arguments.get("attachment_id", "")).strip()
        file = await self._shelf.file_in(incoming.key, file_id) if file_id else None
        if file is None:
            return _refused(f"no file {file_id!r} was shared in this conversation", "arguments")
        if file.kind == "image":
            return _refused(f"{file.name} is an image: it has no lines to read", "arguments")
        if name == "read_attachment":
            try:
                start, end = int(arguments["start_line"]), int(arguments["end_line"])
            except (KeyError, TypeError, ValueError):
                return _refused("start_line and end_line must be whole numbers", "arguments")
            # Off the event loop: a big file's lines take a noticeable time to split.
            text = await asyncio.to_thread(lines, file, start, end, max_chars=self._max_chars)
            return ToolResult(content=json.dumps({"text": text}, ensure_ascii=False))
        if name == "search_attachment":
            query = str(arguments.get("query", "")).strip()
            if not query:
                return _refused("query must not be empty", "arguments")
            found = await asyncio.to_thread(search, file, query, SEARCH_LIMIT, max_chars=self._max_chars)
            return ToolResult(content=json.dumps({"text": found}, ensure_ascii=False))
        return _refused(f"unknown tool {name}", "unknown_tool")


def _refused(detail: str, kind: str) -> ToolResult:
    return ToolResult(content=detail, is_error=True, detail=detail, error_kind=kind)  # type: ignore[arg-type]
