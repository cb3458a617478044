"""Files people shared, as the core read them, kept with their conversation; and what each model was
found unable to take (images), so a refusal is learnt once and not again after a restart.

A file is always looked up within one thread's active conversation: an id from another conversation
(another person's DM) is not found, whoever names it. It goes when its conversation is deleted
(`ThreadLedger._empty_conversation`) or its author is forgotten (`PersonLedger`).
"""

from __future__ import annotations

from typing import Any

from bot.store.conversations import ConversationLedger
from bot.store.rows import C_KEY_WHERE, key_params
from bot.types import ConversationKey
from bot.types.files import StoredFile

# A `StoredFile`'s fields, in their order, as `files` columns.
_COLUMNS = "id, name, kind, mime, size, text, summary, image, image_mime"
_F_COLUMNS = ", ".join(f"f.{name}" for name in _COLUMNS.split(", "))
_ACTIVE = f"JOIN conversations c ON c.id = f.conversation_id WHERE c.archived_at IS NULL AND {C_KEY_WHERE}"


def _file(row: Any) -> StoredFile:
    file_id, name, kind, mime, size, text, summary, image, image_mime = row
    return StoredFile(
        id=str(file_id),
        name=str(name),
        kind=kind,
        mime=str(mime),
        size=int(size),
        text=str(text or ""),
        summary=str(summary or ""),
        image=bytes(image) if image is not None else None,
        image_mime=image_mime,
    )


class FileLedger(ConversationLedger):
    async def keep_file(self, key: ConversationKey, file: StoredFile, *, author: str | None = None) -> bool:
        """Keep `file` with the thread's active conversation; False when its id is kept already (a
        message delivered again reads its files again under the same ids)."""
        async with self._write() as db:
            conversation = await self._conversation_of(db, key)
            found = await db.execute_fetchall("SELECT 1 FROM files WHERE id = ?", (file.id,))
            if found:
                return False
            await db.execute(
                f"INSERT INTO files (conversation_id, author, {_COLUMNS})"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation,
                    author,
                    file.id,
                    file.name,
                    file.kind,
                    file.mime,
                    file.size,
                    file.text,
                    file.summary,
                    file.image,
                    file.image_mime,
                ),
            )
        return True

    async def files_of(self, key: ConversationKey) -> list[StoredFile]:
        """The files of the thread's active conversation, in the order they were shared."""
        rows = await self._rows(
            f"SELECT {_F_COLUMNS} FROM files f {_ACTIVE} ORDER BY f.rowid", key_params(key)
        )
        return [_file(row) for row in rows]

    async def file_in(self, key: ConversationKey, file_id: str) -> StoredFile | None:
        """One file by id, only when it belongs to the thread's active conversation."""
        row = await self._first(
            f"SELECT {_F_COLUMNS} FROM files f {_ACTIVE} AND f.id = ?", (*key_params(key), file_id)
        )
        return _file(row) if row is not None else None

    async def refuses_images(self, model: str) -> bool:
        """Whether `model` was found to refuse image input (NERVE_VISION=auto)."""
        row = await self._first("SELECT no_images FROM model_abilities WHERE model = ?", (model,))
        return bool(row and row[0])

    async def set_refuses_images(self, model: str) -> None:
        await self._change(
            f"INSERT INTO model_abilities (model, no_images, changed_at) VALUES (?, 1, {self._sql.now})"
            " ON CONFLICT (model) DO UPDATE SET no_images = 1, changed_at = excluded.changed_at",
            (model,),
        )
