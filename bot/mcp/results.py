"""Turning what an MCP server answered into a `ToolResult` the loop can act on (S10, S15): bad
arguments go back to the model, an execution failure is not retried blindly, a rate limit waited out."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
from collections.abc import Iterable
from dataclasses import replace

from mcp_types import (
    AudioContent,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from bot.text.render import quote, shorten_runs
from bot.types import Resource, ToolErrorKind, ToolResult

# Largest file from a tool result carried to people (chat platforms take far more; this bounds
# memory per result).
MAX_FILE_BYTES = 8 * 1024 * 1024

# What servers say when the arguments, not the tool, are at fault: the MCP SDK's own validation
# ("1 validation error for get_environment_statusArguments", "Input validation error: ..."),
# JSON-RPC's name for it, and the phrasing our seed servers use.
_ARGUMENT_ERROR = re.compile(
    r"validation errors? for \w*arguments|input validation error|invalid arguments?\b|invalid params",
    re.IGNORECASE,
)
# How the MCP SDK wraps a tool's own error message; people need only the message.
_SDK_PREFIX = re.compile(r"^Error executing tool [^:\s]+: ")
_RATE_LIMIT = re.compile(r"rate[ -]?limit|too many requests|\b429\b", re.IGNORECASE)
_RETRY_AFTER = re.compile(
    r"retry[ -]?after\D{0,20}?(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec|seconds?)?", re.IGNORECASE
)


def describe_block(block: ContentBlock) -> str:
    """Text for one content block; non-text blocks are named, not inlined (the model cannot see them)."""
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, ImageContent | AudioContent):
        return f"[{block.type} ({block.mime_type}, about {len(block.data) * 3 // 4} bytes) omitted]"
    if isinstance(block, EmbeddedResource):
        resource = block.resource
        if isinstance(resource, TextResourceContents):
            return resource.text
        return f"[binary resource {resource.uri} ({resource.mime_type or 'unknown type'}) omitted]"
    if isinstance(block, ResourceLink):
        return f"[resource link: {block.uri} ({block.name})]"
    return f"[{getattr(block, 'type', 'unknown')} content omitted]"


def join_content(blocks: Iterable[ContentBlock]) -> str:
    return "\n".join(describe_block(block) for block in blocks)


def classify_error(text: str) -> tuple[ToolErrorKind, float | None]:
    """The kind of a failed call from the server's words, and any retry-after it named (seconds)."""
    if not _RATE_LIMIT.search(text):
        return ("arguments" if _ARGUMENT_ERROR.search(text) else "execution"), None
    if (match := _RETRY_AFTER.search(text)) is None:
        return "rate_limited", None
    value = float(match.group(1))
    return "rate_limited", value / 1000.0 if (match.group(2) or "s").lower().startswith("m") else value


def resources_of(blocks: Iterable[ContentBlock]) -> tuple[Resource, ...]:
    """The links, texts and files in a result, for people; a file over `MAX_FILE_BYTES` is named only."""
    found: list[Resource] = []
    for block in blocks:
        if isinstance(block, ResourceLink):
            name = block.title or block.name
            found.append(Resource(uri=str(block.uri), name=name, mime_type=block.mime_type, link=True))
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            uri = str(resource.uri)
            name = uri.rstrip("/").rsplit("/", 1)[-1] or uri
            if isinstance(resource, TextResourceContents):
                found.append(Resource(uri=uri, name=name, mime_type=resource.mime_type, text=resource.text))
            else:
                found.append(_file(uri, name, resource.mime_type, resource.blob, MAX_FILE_BYTES))
        elif isinstance(block, ImageContent):
            extension = (block.mime_type.split("/", 1)[-1] or "bin").split("+", 1)[0]
            found.append(_file("", f"image.{extension}", block.mime_type, block.data, MAX_FILE_BYTES))
    return tuple(found)


def _file(uri: str, name: str, mime_type: str | None, blob: str, limit: int) -> Resource:
    size = len(blob) * 3 // 4
    if size > limit:
        note = f"{name} ({mime_type or 'unknown type'}, about {size:,} bytes) is too large to attach."
        return Resource(uri=uri, name=name, mime_type=mime_type, text=note)
    try:
        data = base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return Resource(uri=uri, name=name, mime_type=mime_type, text=f"{name} could not be read.")
    return Resource(uri=uri, name=name, mime_type=mime_type, data=data)


def from_call_result(result: CallToolResult, *, latency_ms: float) -> ToolResult:
    """A server's answer. Structured content wins as the text: it is exact JSON, never re-spliced."""
    if result.is_error:
        text = join_content(result.content) or "The tool reported an error without a message."
        kind, retry_after = classify_error(text)
        # A server's validation message may quote the whole bad value back.
        content = shorten_runs(text) if kind == "arguments" else text
        failure = _error(kind, content, _SDK_PREFIX.sub("", content, count=1), latency_ms)
        return replace(failure, retry_after=retry_after)
    structured = result.structured_content
    content = join_content(result.content)
    if structured is not None:
        with contextlib.suppress(RecursionError, ValueError):  # too deep to encode: the text says the same
            content = json.dumps(structured, ensure_ascii=False)
    return ToolResult(
        content=content, structured=structured, latency_ms=latency_ms, resources=resources_of(result.content)
    )


def _error(kind: ToolErrorKind, content: str, detail: str, latency_ms: float = 0.0) -> ToolResult:
    return ToolResult(content=content, detail=detail, is_error=True, error_kind=kind, latency_ms=latency_ms)


def unknown_tool(name: str, available: Iterable[str]) -> ToolResult:
    names = ", ".join(sorted(available)) or "none"
    content = f"Unknown tool {quote(name)}. Tool names must match exactly; the available tools are: {names}."
    return _error("unknown_tool", content, f"there is no tool named {quote(name)}")


def changed(name: str, detail: str) -> ToolResult:
    """The tool a call was checked against is not the one the server offers now: nothing was run."""
    content = f'Tool "{name}" was not run: {detail}. Its tools as offered now are in the tool list.'
    return _error("changed", content, detail)


def unavailable(server: str, reason: str, *, latency_ms: float = 0.0) -> ToolResult:
    content = f'The "{server}" service is temporarily unavailable ({reason}). Try again later.'
    return _error("unavailable", content, reason, latency_ms)


def timed_out(name: str, timeout: float, *, latency_ms: float) -> ToolResult:
    content = f'Tool "{name}" did not answer within {timeout:g} s; the call was cancelled.'
    return _error("timeout", content, f"it did not answer within {timeout:g} s", latency_ms)


def failed(name: str, detail: str, *, kind: ToolErrorKind = "execution", latency_ms: float) -> ToolResult:
    shown = shorten_runs(detail) if kind == "arguments" else detail
    return _error(kind, f'Tool "{name}" failed: {shown}', shown, latency_ms)
