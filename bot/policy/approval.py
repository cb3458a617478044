"""Whether a tool call may run at once or must wait for a person.

Annotations are the server's own claims, untrusted per the MCP spec unless the operator trusts the
server. Approvals are bound to hashes, so what runs is what was shown.
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
        wire = {"read_only": "readOnlyHint", "destructive": "destructiveHint", "open_world": "openWorldHint"}
        return cls(**{field: data[name] for field, name in wire.items() if isinstance(data.get(name), bool)})


def needs_approval(mode: ApprovalMode, hints: ToolHints, *, trusted: bool) -> bool:
    """Under `writes` only a tool a trusted server marks read-only (and not destructive) runs
    unasked: a lying server must not get its tools run without a person's approval."""
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
