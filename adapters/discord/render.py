"""Turning an `AgentReply` into what Discord accepts: message chunks, tool lines, result embeds.

Discord caps a message at 2,000 characters, an embed description at 4,096, all embeds of a message
at 6,000 together and a message at 10 embeds. Everything here stays inside those limits, and what
does not fit goes into a file instead of being lost. Nothing here does I/O.
"""

from __future__ import annotations

import io
import re
from collections import OrderedDict
from dataclasses import dataclass, field

import discord

from adapters.resources import (
    all_files,
    display_name,
    file_label,
    file_name,
    kind_of,
    link_label,
    shown_uri,
    size_text,
    web_link,
)
from bot.text import outside, pretty_json, show_link_targets, split_markdown, truncate
from bot.types import AgentReply, Attachment, Resource

MESSAGE_LIMIT = 2000
EMBED_DESCRIPTION_LIMIT = 4096
EMBED_TOTAL_LIMIT = 6000
EMBEDS_PER_MESSAGE = 10
EMBED_TITLE_LIMIT = 256
FIELD_VALUE_LIMIT = 1024
# How many tool lines the answer shows before summing up the rest: the button shows them all.
MAX_TOOL_LINES = 8
FILE_LIMIT_BYTES = 8 * 1024 * 1024
# Files a tool returned go with the answer: Discord takes ten a message, each within the smallest
# upload limit a server has, and the message as a whole within its request limit.
FILES_PER_MESSAGE = 10
MESSAGE_FILES_BYTES = 25 * 1024 * 1024

OK_COLOUR = discord.Colour(0x2ECC71)
ERROR_COLOUR = discord.Colour(0xE74C3C)
TEXT_COLOUR = discord.Colour(0x3498DB)
RESULTS_FILENAME = "tool-results.md"


def format_latency(ms: float) -> str:
    """`312 ms` below a second, `1.2 s` above: short enough for a one-line summary."""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def tool_line(attachment: Attachment) -> str:
    """One compact subtext line per tool call, with how many links, texts and files it returned."""
    mark = "✗" if attachment.is_error else "✓"
    line = f"-# 🔧 {attachment.label} {mark} {format_latency(attachment.latency_ms)}"
    kinds = [kind_of(r) for r in attachment.resources]
    extra = ", ".join(_count(n, k) for k in ("link", "text", "file") if (n := kinds.count(k)))
    return f"{line} · {extra}" if extra else line


def tool_lines(attachments: tuple[Attachment, ...]) -> str:
    lines = [tool_line(a) for a in attachments[:MAX_TOOL_LINES]]
    hidden = len(attachments) - MAX_TOOL_LINES
    if hidden > 0:
        lines.append(f"-# … and {hidden} more tool call{'s' if hidden != 1 else ''}")
    return "\n".join(lines)


# A URL as Discord links it: `<url>` (shown, never previewed) or bare (previewed).
_URL = re.compile(r"<https?://[^\s<>]+>|https?://[^\s<>]+", re.IGNORECASE)
_URL_TAIL = ".,:;!?'\"*_~"
# Fences Discord and CommonMark pair the same way: ``` alone or with a language, at a line's start.
_PLAIN_FENCE = re.compile(r"^```(?:[^`\s]*)[ \t]*$")


def _url_end(url: str) -> int:
    """Where a bare URL ends: not on the punctuation after it, nor on a `)` it did not open."""
    end = len(url)
    while end > 0 and (
        (ch := url[end - 1]) in _URL_TAIL or (ch == ")" and url.count("(", 0, end) < url.count(")", 0, end))
    ):
        end -= 1
    return end


def _unpreviewed(match: re.Match[str]) -> str:
    """A URL found by `_URL` as `<url>`, which Discord shows without a preview."""
    url = match.group(0)
    end = _url_end(url)
    return url if url.startswith("<") or not end else f"<{url[:end]}>{url[end:]}"


def _code_blocks(text: str) -> list[tuple[int, int]]:
    """Code blocks whose bounds no reader can see differently: every ``` in the text is a whole
    fence line, and they pair up. Otherwise none (hostile text plays with where code ends)."""
    fences, pos = [], 0
    for line in text.split("\n"):
        if _PLAIN_FENCE.match(line):
            fences.append((pos, pos + len(line)))
        pos += len(line) + 1
    if len(fences) % 2 or text.count("```") != len(fences):
        return []
    return [(fences[i][0], fences[i + 1][1]) for i in range(0, len(fences), 2)]


def _quiet_outside_code(text: str) -> str:
    return outside(text, _code_blocks(text), lambda part: _URL.sub(_unpreviewed, part))


def safe_text(text: str) -> str:
    """Model-written Markdown as Discord should show it: every link shows where it goes, and no URL
    is previewed (`<url>`): a preview fetches the address at once, and a query string carrying the
    conversation would hand it over. Code blocks are left alone (Discord neither links nor previews)."""
    return _quiet_outside_code(show_link_targets(text))


def safe_chunks(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """`safe_text` in messages of at most `limit` characters. A URL longer than a message is cut,
    which leaves its parts without their `<…>`: each part is wrapped again (room is kept for that)."""
    return [_quiet_outside_code(chunk) for chunk in split_markdown(safe_text(text), limit - 4)]


def layout(text: str, status: str, limit: int = MESSAGE_LIMIT, *, empty: str = "") -> list[str]:
    """Messages of at most `limit` characters: the text (`empty` without any), then `status` joined to
    the last one when it fits, else on its own, so the text is never cut to make room. The live
    answer is laid out the same way, so the final one replaces it without moving anything."""
    chunks = safe_chunks(text, limit) or ([empty] if empty else [])
    if status:
        status = truncate(status, limit)[0]
        if chunks and len(chunks[-1]) + 2 + len(status) <= limit:
            chunks[-1] = f"{chunks[-1]}\n\n{status}"
        else:
            chunks.append(status)
    return chunks


def reply_chunks(reply: AgentReply, limit: int = MESSAGE_LIMIT) -> list[str]:
    return layout(reply.text, tool_lines(reply.attachments), limit, empty="(no answer text)")


def code_block(text: str, limit: int, lang: str = "") -> tuple[str, bool]:
    """`text` in a fenced block of at most `limit` characters; says whether it had to cut."""
    fence_open, fence_close = f"```{lang}\n", "\n```"
    room = max(0, limit - len(fence_open) - len(fence_close))
    # A backtick run inside would close the fence early; a zero-width joiner keeps it inert.
    body, cut = truncate(text.replace("```", "`\u200b``"), room)
    return f"{fence_open}{body}{fence_close}", cut


_MARKUP = re.compile(r"([\\`*_~|>#\[\]()<:-])")


def escape_text(text: str) -> str:
    """Outside text as plain text in Discord markdown, also inside a link's label: every character
    markdown, links or emoji could read is escaped (`https\\://` is not turned into a link)."""
    return _MARKUP.sub(r"\\\1", text)


def resource_link(resource: Resource) -> str:
    """A resource link in Discord markdown: clickable only for http(s), labelled `name (host)`;
    any other scheme is its name and its URI in code, never a link."""
    link = web_link(resource.uri)
    if link is None:
        return f"{escape_text(display_name(resource))}: `{shown_uri(resource.uri)}`"
    # The URL is percent-encoded: no `)`, `<`, `>` or space can end it early.
    return f"[{escape_text(link_label(resource, link))}]({link.url})"


def _resource_lines(attachment: Attachment, limit: int) -> tuple[str, bool]:
    items = [r for r in attachment.resources if kind_of(r) in ("link", "file")]
    lines: list[str] = []
    for resource in items:
        line = f"🔗 {resource_link(resource)}" if resource.link else f"📎 {escape_text(file_label(resource))}"
        if sum(len(x) + 1 for x in lines) + len(line) > limit - 20:
            lines.append(f"… and {len(items) - len(lines)} more")
            return "\n".join(lines), True
        lines.append(line)
    return "\n".join(lines), False


def _result_embed(
    attachment: Attachment, args_limit: int, description_limit: int, links_limit: int
) -> tuple[discord.Embed, bool]:
    title = truncate(f"🔧 {attachment.label}", EMBED_TITLE_LIMIT)[0]
    colour = ERROR_COLOUR if attachment.is_error else OK_COLOUR
    description, cut_result = code_block(pretty_json(attachment.content), description_limit, "json")
    embed = discord.Embed(title=title, colour=colour, description=description)
    embed.add_field(name="Status", value="error" if attachment.is_error else "ok", inline=True)
    embed.add_field(name="Latency", value=format_latency(attachment.latency_ms), inline=True)
    arguments, cut_args = code_block(pretty_json(attachment.arguments_json()), args_limit, "json")
    embed.add_field(name="Arguments", value=arguments, inline=False)
    resources, cut_links = _resource_lines(attachment, links_limit)
    if resources:
        embed.add_field(name="Links and files", value=resources, inline=False)
    if attachment.truncated:
        embed.set_footer(text="The result was shortened before the model saw it.")
    return embed, cut_result or cut_args or cut_links


def _text_embed(
    resource: Resource, attachment: Attachment, description_limit: int
) -> tuple[discord.Embed, bool]:
    title = truncate(f"📄 {display_name(resource)}", EMBED_TITLE_LIMIT)[0]
    description, cut = code_block(resource.text or "", description_limit)
    embed = discord.Embed(title=title, colour=TEXT_COLOUR, description=description)
    embed.set_footer(text=truncate(f"{resource.mime_type or 'text'} · from {attachment.name}", 200)[0])
    return embed, cut


@dataclass(frozen=True, slots=True)
class EmbedsMessage:
    """A message of embeds within Discord's limits; what did not fit is attached in full as a file."""

    content: str
    embeds: list[discord.Embed]
    file_text: str | None
    filename: str

    def file(self) -> discord.File | None:
        if self.file_text is None:
            return None
        data = self.file_text.encode("utf-8")[:FILE_LIMIT_BYTES]
        return discord.File(io.BytesIO(data), filename=self.filename)


def results_view(attachments: tuple[Attachment, ...]) -> EmbedsMessage:
    """Embeds for up to ten tool calls and their texts within Discord's limits; the rest as a file."""
    # Each call, then each text it returned: one embed apiece, in the order they happened.
    items: list[tuple[Attachment, Resource | None]] = [
        (a, r) for a in attachments for r in (None, *(t for t in a.resources if kind_of(t) == "text"))
    ]
    shown = items[:EMBEDS_PER_MESSAGE]
    if not shown:
        return EmbedsMessage("This answer used no tools.", [], None, RESULTS_FILENAME)
    per_embed = (EMBED_TOTAL_LIMIT - 100) // len(shown)
    args_limit = min(FIELD_VALUE_LIMIT, max(40, per_embed // 4))
    links_limit = min(FIELD_VALUE_LIMIT, max(100, per_embed // 3))
    description_limit = min(EMBED_DESCRIPTION_LIMIT, max(40, per_embed - args_limit - 80))
    while True:
        built = [
            _result_embed(a, args_limit, description_limit, links_limit)
            if r is None
            else _text_embed(r, a, description_limit)
            for a, r in shown
        ]
        embeds = [embed for embed, _ in built]
        if sum(len(e) for e in embeds) <= EMBED_TOTAL_LIMIT or description_limit <= 40:
            break
        description_limit = max(40, description_limit * 3 // 4)
        args_limit = max(40, args_limit * 3 // 4)
        links_limit = max(100, links_limit * 3 // 4)
    cut = any(was_cut for _, was_cut in built) or len(items) > len(shown)
    note = f"Results of {len(attachments)} tool call{'s' if len(attachments) != 1 else ''}."
    if cut:
        note += " Some are shortened here; the attached file has them in full."
    return EmbedsMessage(note, embeds, results_file(attachments) if cut else None, RESULTS_FILENAME)


def _resources_md(a: Attachment) -> str:
    """A call's links, texts and files for the results file (Markdown; links kept as written)."""
    parts = []
    for r in a.resources:
        kind = kind_of(r)
        if kind == "link":
            parts.append(f"Link: {r.name} <{r.uri}>\n")
        elif kind == "file":
            parts.append(f"File: {file_label(r)} (attached to the answer)\n")
        elif kind == "text":
            parts.append(f"Text {r.name} ({r.mime_type or 'text'}):\n```\n{r.text}\n```\n")
    return "\n".join(parts)


def results_file(attachments: tuple[Attachment, ...]) -> str:
    """Every tool call in full, as Markdown, for results too large for embeds."""
    parts = []
    for a in attachments:
        status = "error" if a.is_error else "ok"
        resources = _resources_md(a)
        parts.append(
            f"## {a.label} ({status}, {format_latency(a.latency_ms)})\n\n"
            f"Arguments:\n```json\n{pretty_json(a.arguments_json())}\n```\n\n"
            f"Result:\n```\n{pretty_json(a.content)}\n```\n" + (f"\n{resources}" if resources else "")
        )
    return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class ReplyFiles:
    """The files one answer's tools returned that Discord takes, and a line naming each it cannot."""

    content: str
    files: list[tuple[str, bytes]] = field(default_factory=list)


def reply_files(attachments: tuple[Attachment, ...]) -> ReplyFiles | None:
    found = all_files(attachments)
    if not found:
        return None
    taken: set[str] = set()
    files: list[tuple[str, bytes]] = []
    skipped: list[tuple[str, str]] = []
    total = 0
    for _, _, resource in found:
        data = resource.data or b""
        if len(data) > FILE_LIMIT_BYTES:
            skipped.append((display_name(resource), f"{size_text(len(data))}: larger than Discord takes"))
        elif len(files) == FILES_PER_MESSAGE:
            skipped.append((display_name(resource), f"more than {FILES_PER_MESSAGE} files"))
        elif total + len(data) > MESSAGE_FILES_BYTES:
            skipped.append((display_name(resource), "the files together are larger than Discord takes"))
        else:
            files.append((file_name(resource, taken), data))
            total += len(data)
    names = ", ".join(escape_text(name) for name, _ in files)
    tools = ", ".join(dict.fromkeys(a.name for a, _, _ in found))
    lines = [f"-# 📎 From {escape_text(tools)}: {names}"] if files else []
    lines += [f"-# Not attached: {escape_text(name)} ({why})" for name, why in skipped[:5]]
    if len(skipped) > 5:
        lines.append(f"-# … and {len(skipped) - 5} more not attached")
    return ReplyFiles(content=truncate("\n".join(lines), MESSAGE_LIMIT)[0], files=files)


class ResultsCache:
    """Tool results by reply reference, the newest `capacity` kept; in memory on purpose (they are in
    the conversation store): after a restart the button says they are gone, no second copy on disk."""

    def __init__(self, capacity: int = 512) -> None:
        self._capacity = capacity
        self._items: OrderedDict[str, tuple[Attachment, ...]] = OrderedDict()

    def put(self, ref: str, attachments: tuple[Attachment, ...]) -> None:
        self._items[ref] = attachments
        self._items.move_to_end(ref)
        while len(self._items) > self._capacity:
            self._items.popitem(last=False)

    def get(self, ref: str) -> tuple[Attachment, ...] | None:
        found = self._items.get(ref)
        if found is not None:
            self._items.move_to_end(ref)
        return found

    def __len__(self) -> int:
        return len(self._items)
