"""AgentReply → Slack messages: Block Kit (or the legacy fallbacks), escaped and split to Slack's limits.

Everything the model or a tool wrote is escaped here, in every field we send: Slack turns `<!here>`,
`<!channel>`, `<!subteam^…>` and `<http://evil|trusted>` into pings and disguised links, and we
cannot be sure which surfaces decode entities, so nothing model-written ever reaches Slack raw.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

from slack_sdk.models.blocks import (
    ContainerBlock,
    ContextActionsBlock,
    FeedbackButtonObject,
    FeedbackButtonsElement,
    MarkdownBlock,
    PlanBlock,
    TaskCardBlock,
)

from adapters.common.memory_words import undo_label
from adapters.common.turn_so_far import Call
from adapters.resources import (
    all_files,
    display_name,
    file_label,
    file_name,
    kind_of,
    link_label,
    shown_uri,
    text_extension,
    web_link,
)
from bot.text import neutralize_mentions, pretty_json, show_link_targets, split_markdown, truncate
from bot.types import AgentReply, Attachment, Resource

MESSAGE_TEXT_LIMIT = 40_000
SECTION_TEXT_LIMIT = 3_000
MARKDOWN_BLOCK_LIMIT = 12_000  # also the total of markdown blocks in one message
MAX_BLOCKS = 50
MAX_ATTACHMENTS = 20
# Raw answer text per message: escaping can only grow it, and each chunk is re-split if it does.
ANSWER_CHUNK = 10_000
RESULT_SHOWN = 2_400  # characters of a tool result shown inline (section text is capped at 3,000)
ARGUMENTS_SHOWN = 400
MAX_UPLOADS = 3  # files per turn, so a chatty tool cannot flood the thread
# Files and images tools returned, per answer: each goes up once; past this they are only named.
MAX_RESOURCE_FILES = 10
RESOURCE_LINES = 10  # links and files listed in one call's details


class Level(enum.IntEnum):
    """How rich a workspace lets our messages be; each `invalid_blocks` moves one step down."""

    RICH = 0  # markdown block + collapsible container blocks per tool
    LEGACY = 1  # markdown block + legacy attachments per tool
    PLAIN = 2  # text only + legacy attachments


@dataclass(frozen=True, slots=True, kw_only=True)
class OutMessage:
    """One chat.postMessage / chat.update body (without channel and thread)."""

    text: str
    blocks: list[dict[str, Any]] | None = None
    attachments: list[dict[str, Any]] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Upload:
    """A file sent to the thread: a result or text too big to show inline, or a file a tool returned."""

    filename: str
    title: str
    content: str | bytes
    # Read to people who cannot see an image.
    alt_text: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderedReply:
    messages: list[OutMessage]
    uploads: list[Upload] = field(default_factory=list)


def escape(text: str) -> str:
    """Slack's escaping (`&`, `<`, `>`) plus broken `@here`-style words: no pings, no control sequences."""
    return neutralize_mentions(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def safe_markdown(text: str) -> str:
    """Model-written Markdown, made safe to send: links shown with their target, then escaped."""
    return escape(show_link_targets(text))


def escape_capped(text: str, limit: int) -> str:
    """`text` escaped and at most `limit` characters, cut on the raw text so no entity is split."""
    while True:
        out = escape(text)
        if len(out) <= limit:
            return out
        text, _ = truncate(text, max(0, len(text) - (len(out) - limit) - 1))


def answer_chunks(text: str) -> list[str]:
    """The answer as escaped Markdown chunks, each fitting one markdown block, fences intact."""
    out: list[str] = []
    pending = split_markdown(text, ANSWER_CHUNK)
    while pending:
        chunk = pending.pop(0)
        safe = safe_markdown(chunk)
        if len(safe) <= MARKDOWN_BLOCK_LIMIT:
            out.append(safe)
        else:
            pending[0:0] = split_markdown(chunk, max(64, len(chunk) // 2))
    return out or [escape("(The answer was empty.)")]


def call_outcome(att: Attachment) -> str:
    """How a call went, as its detail's subtitle and its streamed task say it: "ok · 120 ms"."""
    ms = att.latency_ms
    took = f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"
    return f"{'error' if att.is_error else 'ok'} · {took}"


def quoted(text: str, limit: int = 2_000) -> str:
    return "\n".join("> " + line for line in escape_capped(text, limit).splitlines() or [""])


def _fenced(text: str, limit: int) -> str:
    return "```" + escape_capped(text, limit - 6) + "```"


def _arguments(att: Attachment) -> str:
    return truncate(att.arguments_json(), ARGUMENTS_SHOWN)[0] or "{}"


def _result(att: Attachment) -> tuple[str, bool]:
    """The result as shown inline, and whether the full text goes up as a file."""
    shown, cut = truncate(pretty_json(att.content), RESULT_SHOWN)
    return shown, cut or att.truncated


def _note(what: str, uploaded: bool, shortened: bool) -> str:
    if uploaded:
        return f"_The full {what} is attached to this thread as a file._"
    return f"_The {what} was shortened._" if shortened else ""


def resource_link(resource: Resource) -> str:
    """A resource link in Slack markup: clickable only for http(s); any other scheme is shown in code."""
    link = web_link(resource.uri)
    if link is None:
        return f"{escape(display_name(resource))} `{escape(shown_uri(resource.uri))}`"
    # The URL is percent-encoded already (no `<`, `>` or `|`); Slack wants `&` as an entity.
    return f"<{link.url.replace('&', '&amp;')}|{escape(link_label(resource, link))}>"


def _resource_lines(att: Attachment, attached: frozenset[int]) -> str:
    """The links and files of one call, one bullet each, within a section's 3,000 characters."""
    items = [(i, r) for i, r in enumerate(att.resources) if kind_of(r) in ("link", "file")]
    lines: list[str] = []
    used = 0  # characters of the lines so far, each with its newline
    for i, resource in items:
        if resource.link:
            line = f"• 🔗 {resource_link(resource)}"
        else:
            where = "attached to this thread" if i in attached else "not attached: too many files"
            line = f"• 📎 {escape(file_label(resource))} — _{where}_"
        if len(lines) == RESOURCE_LINES or used + len(line) > SECTION_TEXT_LIMIT - 120:
            rest = items[len(lines) :]
            left = sum(1 for j, r in rest if kind_of(r) == "file" and j not in attached)
            why = f"; {left} file{'s' if left != 1 else ''} not attached: too many files" if left else ""
            lines.append(f"_… and {len(rest)} more{why}_")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


def _container(title: str, subtitle: str, children: list[Any]) -> dict[str, Any]:
    block = ContainerBlock(
        title=title, subtitle=subtitle, child_blocks=children, is_collapsible=True, default_collapsed=True
    )
    return block.to_dict()


def _legacy(color: str, title: str, text: str, fallback: str) -> dict[str, Any]:
    """A legacy attachment: Slack collapses long attachment text behind "Show more"."""
    return {"color": color, "title": title, "text": text, "fallback": fallback, "mrkdwn_in": ["text"]}


def _tool_detail(att: Attachment, *, rich: bool, uploaded: bool, attached: frozenset[int]) -> dict[str, Any]:
    """A call's arguments, result, links and files: a collapsible container, else a legacy attachment."""
    shown, _ = _result(att)
    note = _note("result", uploaded, att.truncated)
    resources = _resource_lines(att, attached)
    title = escape_capped(att.label, 150)
    if not rich:
        text = f"*Arguments* `{escape_capped(_arguments(att), 600)}`\n" + _fenced(shown, SECTION_TEXT_LIMIT)
        return _legacy(
            "danger" if att.is_error else "good",
            f"{title} — {call_outcome(att)}",
            text + (f"\n{note}" if note else "") + (f"\n{resources}" if resources else ""),
            f"{title}: {call_outcome(att)}",
        )
    children: list[Any] = [
        section("*Arguments*\n" + _fenced(_arguments(att), 900)),
        section("*Result*\n" + _fenced(shown, SECTION_TEXT_LIMIT - 20)),
        *([context(note)] if note else []),
        *([section(resources)] if resources else []),
    ]
    return _container(title, f"{'❌' if att.is_error else '✅'} {call_outcome(att)}", children)


def _text_shown(resource: Resource) -> tuple[str, bool]:
    return truncate(resource.text or "", RESULT_SHOWN)


def _text_detail(resource: Resource, att: Attachment, *, rich: bool, uploaded: bool) -> dict[str, Any]:
    """A text a tool returned, as its own detail beside its call's."""
    shown, cut = _text_shown(resource)
    note = _note("text", uploaded, cut)
    name = escape_capped(display_name(resource), 150)
    subtitle = escape_capped(truncate(f"📄 {resource.mime_type or 'text'} · from {att.name}", 140)[0], 150)
    text = _fenced(shown, SECTION_TEXT_LIMIT)
    if rich:
        return _container(name, subtitle, [section(text), *([context(note)] if note else [])])
    return _legacy("#439FE0", f"{name} — {subtitle}", text + (f"\n{note}" if note else ""), name)


def tool_file_name(tool: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", tool)[:60] or "tool"


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class _Plan:
    """What of a reply goes up as files: `results` by call id, `resources` by call id and place."""

    uploads: list[Upload]
    results: set[str]
    resources: set[tuple[str, int]]


def _plan_uploads(reply: AgentReply) -> _Plan:
    long = [att for att in reply.attachments if _result(att)[1]][:MAX_UPLOADS]
    texts = [
        (att, i, resource)
        for att in reply.attachments
        for i, resource in enumerate(att.resources)
        if kind_of(resource) == "text" and _text_shown(resource)[1]
    ][: MAX_UPLOADS - len(long)]
    files = all_files(reply.attachments)[:MAX_RESOURCE_FILES]
    uploads = [
        Upload(
            filename=f"{tool_file_name(att.name)}-result.{'json' if _is_json(att.content) else 'txt'}",
            title=f"{att.name} result",
            content=pretty_json(att.content),
        )
        for att in long
    ]
    taken = {u.filename for u in uploads}
    # A text goes up as its text, named for its kind; a file as its bytes, an image with words to read.
    uploads += [
        Upload(
            filename=file_name(r, taken, extension=text_extension(r) if r.text is not None else ""),
            title=display_name(r),
            content=r.text if r.text is not None else r.data or b"",
            alt_text=display_name(r) if r.text is None and (r.mime_type or "").startswith("image/") else None,
        )
        for _, _, r in [*texts, *files]
    ]
    resources = {(att.tool_call_id, i) for att, i, _ in [*texts, *files]}
    return _Plan(uploads=uploads, results={att.tool_call_id for att in long}, resources=resources)


def _detail_items(att: Attachment, plan: _Plan, level: Level) -> list[dict[str, Any]]:
    attached = frozenset(i for i in range(len(att.resources)) if (att.tool_call_id, i) in plan.resources)
    rich = level is Level.RICH
    texts = [(i, r) for i, r in enumerate(att.resources) if kind_of(r) == "text"]
    return [
        _tool_detail(att, rich=rich, uploaded=att.tool_call_id in plan.results, attached=attached),
        *(_text_detail(resource, att, rich=rich, uploaded=i in attached) for i, resource in texts),
    ]


def render_reply(
    reply: AgentReply, level: Level, *, feedback: str | None = None, undo: bool = False
) -> RenderedReply:
    """The messages of one answer: tool details first (as they happened), then the answer text; in a
    rich workspace, the first one ends with feedback buttons for the turn `feedback` names; with
    `undo`, wherever blocks are shown, with an Undo for each memory the turn saved."""
    plan = _plan_uploads(reply)
    chunks = answer_chunks(reply.text)
    tool_items = [item for att in reply.attachments for item in _detail_items(att, plan, level)]

    per_message = MAX_BLOCKS - 1 if level is Level.RICH else MAX_ATTACHMENTS
    groups = [tool_items[i : i + per_message] for i in range(0, len(tool_items), per_message)] or [[]]
    # Overflowing tool details (dozens of calls) get their own messages before the answer.
    messages = [_message("Tool results", group, None, level) for group in groups[:-1]]
    messages += [_message(text, groups[-1] if i == 0 else [], text, level) for i, text in enumerate(chunks)]
    if feedback is not None and level is Level.RICH:
        messages[0] = replace(messages[0], blocks=[*(messages[0].blocks or []), feedback_block(feedback)])
    if undo and level is not Level.PLAIN:
        messages[0] = replace(messages[0], blocks=[*(messages[0].blocks or []), *undo_blocks(reply)])
    return RenderedReply(messages=messages, uploads=plan.uploads)


def _message(text: str, tools: list[dict[str, Any]], markdown: str | None, level: Level) -> OutMessage:
    fallback = truncate(text, MESSAGE_TEXT_LIMIT)[0]
    if level is Level.PLAIN:
        return OutMessage(text=fallback, blocks=[], attachments=tools or None)
    answer = [MarkdownBlock(text=markdown).to_dict()] if markdown else []
    if level is Level.RICH:
        return OutMessage(text=fallback, blocks=tools + answer)
    return OutMessage(text=fallback, blocks=answer, attachments=tools or None)


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": truncate(text, SECTION_TEXT_LIMIT)[0]}}


def button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    """A Block Kit button; `value` is all a press carries, so any process can act on it."""
    styled = {"style": style} if style is not None else {}
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "action_id": action_id,
        "value": value,
    } | styled


def confirmed(button: dict[str, Any], title: str, question: str, yes: str, no: str) -> dict[str, Any]:
    """`button`, asked about first in Slack's own dialog (`title`, `question`, `yes` / `no`)."""

    def plain(text: str) -> dict[str, Any]:
        return {"type": "plain_text", "text": text}

    asked = {"title": plain(title), "text": plain(question), "confirm": plain(yes), "deny": plain(no)}
    return button | {"confirm": asked}


def context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": truncate(text, 3_000)[0]}]}


def when(expires_at: float) -> str:
    """A time Slack shows in each reader's own time zone."""
    stamp = int(expires_at)
    return f"<!date^{stamp}^{{date_short_pretty}} at {{time}}|{stamp} (Unix time)>"


def plain_message(text: str) -> OutMessage:
    """A short notice we wrote ourselves (apology, reset confirmation): text only, still escaped."""
    return OutMessage(text=escape(text), blocks=[])


# --- progress ------------------------------------------------------------------------------------


def _state(call: Call) -> str:
    return "running" if call.finished is None else "ok" if call.ok else "error"


def status_message(headline: str, tools: list[Call], *, rich: bool, text: str = "") -> OutMessage:
    """A turn's live message: a headline (until words arrive), the tool calls, the answer so far."""
    icon = {"running": "⏳", "ok": "✅", "error": "❌"}
    shown = answer_chunks(text)[0] if text.strip() else ""
    blocks = [] if shown else [context(escape_capped(headline, 2000))]
    if tools and rich:
        cards = [
            TaskCardBlock(
                task_id=t.id[:200] or f"t{i}",
                title=truncate(t.name, 150)[0],
                status={"running": "in_progress", "ok": "complete", "error": "error"}[_state(t)],
            )
            for i, t in enumerate(tools[:40])
        ]
        blocks.append(PlanBlock(title="Tool calls", tasks=cards).to_dict())
    elif tools:
        lines = "\n".join(f"{icon[_state(t)]} `{escape_capped(t.name, 150)}`" for t in tools[-40:])
        blocks.append(section(lines))
    if shown:
        blocks.append(MarkdownBlock(text=shown).to_dict())
        return OutMessage(text=truncate(shown, MESSAGE_TEXT_LIMIT)[0], blocks=blocks)
    return OutMessage(text=escape(headline), blocks=blocks)


FEEDBACK_ACTION = "nerve_feedback"


def feedback_block(ref: str) -> dict[str, Any]:
    """Thumbs up / down under an answer; `ref` says which turn a click is about."""
    buttons = FeedbackButtonsElement(
        action_id=FEEDBACK_ACTION,
        positive_button=FeedbackButtonObject(
            text="Good answer", accessibility_label="This answer was helpful", value=f"up|{ref}"
        ),
        negative_button=FeedbackButtonObject(
            text="Bad answer", accessibility_label="This answer was not helpful", value=f"down|{ref}"
        ),
    )
    return ContextActionsBlock(elements=[buttons]).to_dict()


# Every memory button's action_id starts with this; the rest names what it does (`adapters.slack.memory`).
MEMORY_ACTION = "nerve_memory"


def undo_blocks(reply: AgentReply) -> list[dict[str, Any]]:
    """An Undo per memory the turn saved (none when it saved none); each carries its memory's id, so
    a press works in whichever process receives it, after a restart too."""
    saved = reply.remembered[:25]
    if not saved:
        return []
    buttons = [
        button(truncate(undo_label(memory, len(saved)), 75)[0], f"{MEMORY_ACTION}.undo.{index}", memory.id)
        for index, memory in enumerate(saved)
    ]
    return [{"type": "actions", "block_id": "nerve_memory_undo", "elements": buttons}]
