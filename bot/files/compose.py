"""What the model is sent of the files in a conversation, each round.

The current turn's message carries each of its files fitted to a share of the budget (`fit`: whole
when it fits, else head, structure and tail with a pointer to `read_attachment`), and its images as
image parts when the model can see. Earlier messages carry the short form (header and first lines):
the model reads more with `read_attachment` / `search_attachment`.

An earlier image is sent again only when the current question refers to it: it names the file (or
its id), or speaks of an image, screenshot, picture, photo, diagram… (then the latest image is sent).
The alternative, a description the model wrote when it first saw the image, would make every later
answer rest on what the model chose to notice then; sending the image again costs tokens only when
a question is about it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.files.fit import data_url, fit, short
from bot.files.intake import written
from bot.types import ChatMessage
from bot.types.files import NOT_READ, StoredFile

# The share of the context budget the current message's files may take in all.
FILES_SHARE = 0.5
# Fewer tokens than this per file and a file is not worth fitting: the pointer to the tools says more.
MIN_FILE_TOKENS = 200
# Words that speak of an image ("figure" and "scan" are left out: "figure out", "scan the logs").
_IMAGE_WORDS = re.compile(
    r"\b(?:image|picture|pic|photo|photograph|screenshot|screen ?shot|diagram|chart|graph|drawing"
    r"|logo|illustration|sketch)s?\b",
    re.IGNORECASE,
)


def current_turn(history: Sequence[ChatMessage]) -> range:
    """The indexes of the current turn's user messages: the last run of them (a turn a stop cut off
    leaves one unanswered before the next, and both are answered together)."""
    last = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "user"), None)
    if last is None:
        return range(0)
    first = last
    while first > 0 and history[first - 1].role == "user":
        first -= 1
    return range(first, last + 1)


def referred_images(question: str, earlier: Sequence[StoredFile]) -> list[StoredFile]:
    """The earlier images the question is about: those it names, else the latest when it speaks of an
    image in general words."""
    images = [f for f in earlier if f.kind == "image" and f.image is not None]
    lowered = question.lower()
    named = [f for f in images if f.id.lower() in lowered or (f.name and f.name.lower() in lowered)]
    if named:
        return named
    return images[-1:] if _IMAGE_WORDS.search(question) else []


def compose(
    history: Sequence[ChatMessage],
    files: Mapping[str, StoredFile],
    *,
    context_tokens: int,
    sees: bool,
) -> list[ChatMessage]:
    """`history` with its files' text (and, when the model `sees`, the images) where the model reads it."""
    current = current_turn(history)
    now = [fid for i in current for fid in history[i].files]
    fitted = [fid for fid in now if fid in files and files[fid].kind != "image"]
    share = max(MIN_FILE_TOKENS, int(context_tokens * FILES_SHARE) // max(1, len(fitted)))
    # What the person wrote: a listing line's type ("image/png") is no question about an image.
    question = "\n".join(written(history[i].content or "") for i in current)
    earlier = [files[fid] for m in history[: current.start] for fid in m.files if fid in files]
    again = referred_images(question, earlier) if sees else []
    out: list[ChatMessage] = []
    for index, message in enumerate(history):
        if message.role != "user" or not (message.files or (again and index == current.stop - 1)):
            out.append(message)
            continue
        blocks: list[str] = []
        images: list[str] = []
        for fid in message.files:
            file = files.get(fid)
            if file is None:
                blocks.append(f"[file {fid}: {NOT_READ}]")
            elif index not in current:
                blocks.append(short(file))
            elif file.kind == "image":
                url = data_url(file) if sees else None
                blocks.append(fit(file, share, shown=url is not None))
                images += [url] if url else []
            else:
                blocks.append(fit(file, share))
        if index == current.stop - 1:
            for file in again:
                url = data_url(file)
                if url is not None:
                    blocks.append(
                        f"(the earlier image {file.name} [file {file.id}] is shown again with this message)"
                    )
                    images.append(url)
        content = "\n\n".join(part for part in (message.content or "", *blocks) if part)
        out.append(replace(message, content=content, images=(*message.images, *images)))
    return out
