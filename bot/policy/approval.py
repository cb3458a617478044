"""Whether a tool call may run at once or must wait for a person.

The configured mode is the floor. A server's annotations are its own claims, and the MCP
specification says a client must treat them as untrusted unless they come from a trusted server: so
`readOnlyHint` lowers the bar (a call under `writes` runs at once) only for a server the operator
marked `"trustAnnotations": true` in the servers file. Any other server's tools ask before every
call under `writes`, whatever they claim, until a person remembers "always allow here" for one of
them. A tool without annotations is treated as one that may write, and a destructive hint always
counts. Approvals are bound to hashes, so what runs is exactly what was shown, and a remembered
"always allow here" stops applying when the tool's definition changes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

ApprovalMode = Literal["never", "writes", "always"]
DEFAULT_MODE: ApprovalMode = "writes"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolHints:
    """The MCP tool annotations that matter here; None means the server did not say."""

    read_only: bool | None = None
    destructive: bool | None = None
    open_world: bool | None = None

    @classmethod
    def from_annotations(cls, annotations: dict[str, Any] | None) -> ToolHints:
        """From the wire form (`readOnlyHint`, …); anything that is not a real boolean counts as unsaid."""
        data = annotations or {}

        def flag(name: str) -> bool | None:
            value = data.get(name)
            return value if isinstance(value, bool) else None

        return cls(
            read_only=flag("readOnlyHint"),
            destructive=flag("destructiveHint"),
            open_world=flag("openWorldHint"),
        )


def needs_approval(mode: ApprovalMode, hints: ToolHints, *, trusted: bool) -> bool:
    """True when a person must approve the call before it runs.

    `never` is an admin's explicit choice and runs at once; `always` always asks; under `writes`
    only a tool that a trusted server (`trusted`) marks read-only runs at once (a read-only hint
    next to a destructive one is contradictory, and the safer reading wins). An untrusted server's
    read-only claim changes nothing: a lying server must not get its tools run unasked.
    """
    if mode == "never":
        return False
    if mode == "always":
        return True
    return not (trusted and hints.read_only is True and hints.destructive is not True)


def _digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def call_hash(server: str, tool: str, arguments: dict[str, Any]) -> str:
    """What an approval is bound to: a different server, tool or argument is a different call."""
    return _digest({"server": server, "tool": tool, "arguments": arguments})


def definition_hash(
    name: str, description: str, input_schema: dict[str, Any], annotations: dict[str, Any] | None
) -> str:
    """What a remembered approval is bound to: the tool as the server defines it right now."""
    return _digest(
        {"name": name, "description": description, "schema": input_schema, "annotations": annotations or {}}
    )
