"""Files in the turn: what the façade and the loop call, over the store's files and the model's sight.

`FileDesk` lives as long as the agent: it takes in a message's files (`bot.files.intake`) and, each
turn, loads the conversation's files into a `TurnFiles`, which composes every round's request
(`bot.files.compose`) and asks the model again without images when it refuses them (`bot.files.vision`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bot.errors import ImagesRefused
from bot.files.compose import compose
from bot.files.fit import size_text
from bot.files.intake import FileRules, Intake, take_in
from bot.files.tools import FileTools
from bot.files.vision import Vision, VisionLedger, VisionMode
from bot.seams import LLM
from bot.store.files import FileLedger
from bot.types import ChatMessage, Completion, ConversationKey, Incoming, Progress, ToolSpec
from bot.types.files import StoredFile


class FileShelf(VisionLedger, Protocol):
    """The store's files (`bot.store.files.FileLedger`)."""

    async def keep_file(
        self, key: ConversationKey, file: StoredFile, *, author: str | None = None
    ) -> bool: ...

    async def files_of(self, key: ConversationKey) -> list[StoredFile]: ...

    async def file_in(self, key: ConversationKey, file_id: str) -> StoredFile | None: ...


@dataclass(eq=False, kw_only=True)
class TurnFiles:
    """One turn's files and whether its model sees; `notices` go at the top of the answer.
    `model`: the model the turn's place asks first, whose sight decides `sees`."""

    files: dict[str, StoredFile]
    vision: Vision
    sees: bool
    model: str
    context_tokens: int
    notices: list[str] = field(default_factory=list)

    def compose(self, history: Sequence[ChatMessage]) -> list[ChatMessage]:
        return compose(history, self.files, context_tokens=self.context_tokens, sees=self.sees)

    async def complete(
        self,
        llm: LLM,
        request: list[ChatMessage],
        tools: Sequence[ToolSpec],
        progress: Progress,
        again: Callable[[], list[ChatMessage]],
    ) -> Completion:
        """One model call; when images are refused (NERVE_VISION=auto), learnt, told, asked again
        without them (`again` builds the request anew)."""
        try:
            return await llm.complete(request, tools, progress)
        except ImagesRefused as refusal:
            if self.vision.mode != "auto" or not any(message.images for message in request):
                raise
            # The model that refused, which may be a fallback of the place's own.
            refuser = refusal.model or self.model
        await self.vision.refused(refuser)
        self.sees = False
        shown = [f for f in self.files.values() if f.kind == "image" and _sent(f, request)]
        named = ", ".join(f"{f.name} ({size_text(f.size)})" for f in shown) or "the images' names and sizes"
        self.notices.append(f"⚠️ The model cannot see images; I read only {named}.")
        return await llm.complete(again(), tools, progress)


def _sent(file: StoredFile, request: Sequence[ChatMessage]) -> bool:
    return any(f"[file {file.id}" in (m.content or "") or file.id in m.files for m in request if m.images)


class FileDesk:
    """The files of every conversation, for the façade (intake) and the loop (each turn's files)."""

    def __init__(
        self, shelf: FileShelf, rules: FileRules, vision: Vision, tools: FileTools, context_tokens: int
    ) -> None:
        self._shelf = shelf
        self.rules = rules
        self.vision = vision
        self.tools = tools
        self._context_tokens = context_tokens

    async def take_in(
        self, incoming: Incoming, ids: Sequence[str], author: str, progress: Progress
    ) -> Intake:
        """Read and keep the files of `incoming` (already stored with its message under `ids`)."""

        async def keep(file: StoredFile) -> None:
            await self._shelf.keep_file(incoming.key, file, author=author)

        async def known(file_id: str) -> StoredFile | None:
            return await self._shelf.file_in(incoming.key, file_id)

        intake = await take_in(incoming.files, ids, self.rules, keep=keep, known=known, progress=progress)
        self.tools.mark(incoming.key, bool(intake.read))
        return intake

    async def for_turn(
        self,
        key: ConversationKey,
        history: Sequence[ChatMessage],
        notices: list[str],
        model: str | None = None,
    ) -> TurnFiles | None:
        """The conversation's files for this turn; None when none of its messages carries one.
        `notices`: the turn's own list, said at the top of its answer; `model`: the one the turn's
        place asks first (None: the primary)."""
        if not any(message.files for message in history):
            self.tools.mark(key, False)
            return None
        files = {file.id: file for file in await self._shelf.files_of(key)}
        self.tools.mark(key, bool(files))
        model = model or self.vision.model
        return TurnFiles(
            files=files,
            vision=self.vision,
            sees=await self.vision.sees(model),
            model=model,
            context_tokens=self._context_tokens,
            notices=notices,
        )


def file_desk(
    store: object, rules: FileRules, vision: VisionMode, model: str, context_tokens: int
) -> FileDesk | None:
    """The desk over a store's files (`FileLedger`); None for a store that keeps none (a file is then
    only named in its message)."""
    if not isinstance(store, FileLedger):
        return None
    tools = FileTools(store, context_tokens=context_tokens)
    return FileDesk(store, rules, Vision(vision, model, store), tools, context_tokens)
