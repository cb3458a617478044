"""The built-in tools `remember`, `recall` and `forget`: run in-process, never by an MCP server,
because only the core knows for certain who asks and where (`CallContext.incoming`).

Every call is bound to its turn's scope (`bot.memory.scope`): a person reads and forgets only their
own memories and their place's; a place memory is removed by its writer or an admin. A `remember`
whose round read tool results waits for its person's OK first (`TurnScreen`, `bot.turn.screen`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from bot.memory.scope import turn_scope
from bot.memory.secrets import secret_kind
from bot.policy.platforms import Platforms
from bot.policy.scopes import Scopes
from bot.store.memories import MemoryLedger, MemoryScope
from bot.types import Attachment, CallContext, ChatMessage, Memory, Remembered, ToolResult, ToolSpec

logger = logging.getLogger(__name__)

MEMORY_SERVER = "memory"
PRIVATE_NOTE = "used in your DMs only; say it may be used anywhere to have it here too"
MAX_MEMORY_CHARS = 500
RECALL_LIMIT = 20

_ABOUT = {
    "type": "string",
    "enum": ["me", "here"],
    "description": "me: the person asking; here: this channel or server, for everyone in it",
}

SPECS = (
    ToolSpec(
        name="remember",
        description=(
            "Save a fact for later conversations, when the person asks you to remember something. "
            "Write it as a short statement. Never for passwords, keys or tokens."
        ),
        parameters={
            "type": "object",
            "properties": {
                "text": {"type": "string", "maxLength": MAX_MEMORY_CHARS},
                "about": _ABOUT,
                "anywhere": {
                    "type": "boolean",
                    "description": "about=me only: also use it in shared channels (default: DMs only)",
                },
            },
            "required": ["text", "about"],
            "additionalProperties": False,
        },
        server=MEMORY_SERVER,
        original_name="remember",
    ),
    ToolSpec(
        name="recall",
        description="Search what was remembered about the person and this place (empty query: the latest).",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "additionalProperties": False,
        },
        server=MEMORY_SERVER,
        original_name="recall",
    ),
    ToolSpec(
        name="forget",
        description="Delete one remembered fact by its id (find it with recall first).",
        parameters={
            "type": "object",
            "properties": {"memory_id": {"type": "string"}},
            "required": ["memory_id"],
            "additionalProperties": False,
        },
        server=MEMORY_SERVER,
        original_name="forget",
    ),
)
NAMES = frozenset(spec.name for spec in SPECS)


def read_by_tools(history: list[ChatMessage], own: frozenset[str] = frozenset()) -> bool:
    """Whether the model's context holds text no person wrote: a result of any tool but memory's
    (and the other built-in tools named in `own`, whose results hold only what people wrote)."""
    return any(message.role == "tool" and message.name not in NAMES | own for message in history)


def described(memory: Memory, scope: MemoryScope) -> dict[str, Any]:
    about = "me" if memory.kind == "person" else "here"
    return {
        "id": memory.id,
        "text": memory.text,
        "about": about,
        "anywhere": memory.anywhere,
        "saved": memory.created_at[:10],
    }


class MemoryTools:
    """The three tools over the memory ledger, for whichever turn calls them."""

    def __init__(
        self, ledger: MemoryLedger, *, platforms: Platforms, admins: frozenset[str], scopes: Scopes
    ) -> None:
        self.ledger = ledger
        self._platforms = platforms
        self._admins = admins
        self._scopes = scopes

    def list_tools(self) -> list[ToolSpec]:
        return list(SPECS)

    def starting(self) -> list[str]:
        return []

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
            return _refused("memory is only available in a conversation", "execution")
        scope = turn_scope(incoming, self._platforms)
        admin = incoming.user_id in self._admins
        if name == "remember":
            return await self._remember(
                arguments, scope, admin, writable=self._scopes.members_remember(incoming.where())
            )
        if name == "recall":
            return await self._recall(str(arguments.get("query", "")), scope)
        if name == "forget":
            return await self._forget(str(arguments.get("memory_id", "")), scope, admin)
        return _refused(f"there is no memory tool named {name!r}", "unknown_tool")

    async def _remember(
        self, arguments: dict[str, Any], scope: MemoryScope, admin: bool, *, writable: bool
    ) -> ToolResult:
        text = " ".join(str(arguments.get("text", "")).split())
        if not text:
            return _refused("there is nothing to remember: `text` is empty", "arguments")
        if len(text) > MAX_MEMORY_CHARS:
            return _refused(f"a memory holds at most {MAX_MEMORY_CHARS} characters", "arguments")
        if kind := secret_kind(text):
            return _refused(
                f"not remembered: it looks like {kind}, and nerve never stores secrets in memory", "execution"
            )
        # In a DM or the terminal "here" is the person alone: it is theirs.
        for_place = arguments.get("about") == "here" and not scope.private
        if for_place and not (writable or admin):
            return _refused("in this place only admins may save memories for everyone", "execution")
        memory = await self.ledger.add_memory(
            kind="place" if for_place else "person",
            subject=scope.place if for_place else scope.person,
            text=text,
            anywhere=bool(arguments.get("anywhere")) and not for_place,
            written_by=scope.person,
            written_in=scope.place,
        )
        logger.info("memory %s saved (%s)", memory.id, memory.kind)
        saved = {"remembered": text, "for": "this place" if for_place else "you", "id": memory.id}
        if not for_place and not memory.anywhere and not scope.private:
            # Said in a shared place, kept for private ones: the person should not expect it here.
            saved["note"] = PRIVATE_NOTE
        return ToolResult(content=json.dumps(saved, ensure_ascii=False), structured=saved)

    async def _recall(self, query: str, scope: MemoryScope) -> ToolResult:
        found = await self.ledger.search_memories(scope, query, RECALL_LIMIT + 1)
        if not found and not query.strip():
            found = await self.ledger.recent_memories(scope, RECALL_LIMIT + 1)
        listed = {
            "memories": [described(memory, scope) for memory in found[:RECALL_LIMIT]],
            "more": len(found) > RECALL_LIMIT,
        }
        return ToolResult(content=json.dumps(listed, ensure_ascii=False), structured=listed)

    async def _forget(self, memory_id: str, scope: MemoryScope, admin: bool) -> ToolResult:
        memory = await self.ledger.memory(memory_id.strip())
        # Someone else's memory is "unknown" too: its existence is not theirs to learn.
        if memory is None or not may_forget(memory, scope, admin):
            return _refused(f"no memory {memory_id!r} of yours or of this place", "arguments")
        await self.ledger.delete_memory(memory.id)
        # A memory kept for DMs is not repeated in a shared place while being forgotten there.
        shown = scope.private or memory.kind == "place" or memory.anywhere
        forgot = {"forgot": memory.text if shown else "(a memory kept for your DMs)", "id": memory.id}
        return ToolResult(content=json.dumps(forgot, ensure_ascii=False))


def remembered(attachments: list[Attachment]) -> tuple[Remembered, ...]:
    """The memories a turn's `remember` calls saved, read back from their results."""
    saved: list[Remembered] = []
    for attachment in attachments:
        if attachment.server != MEMORY_SERVER or attachment.name != "remember" or attachment.is_error:
            continue
        try:
            result = json.loads(attachment.content)
            saved.append(
                Remembered(
                    id=result["id"],
                    text=result["remembered"],
                    owner=result["for"],
                    note=result.get("note", ""),
                )
            )
        except (ValueError, KeyError, TypeError):
            continue
    return tuple(saved)


def may_forget(memory: Memory, scope: MemoryScope, admin: bool) -> bool:
    """Its person forgets a personal memory; a place memory goes by its writer's or an admin's word."""
    if memory.kind == "person":
        return memory.subject == scope.person
    return admin or (memory.subject == scope.place and memory.written_by == scope.person)


def _refused(detail: str, kind: str) -> ToolResult:
    return ToolResult(content=detail, is_error=True, detail=detail, error_kind=kind)  # type: ignore[arg-type]
