"""The scopes of the notes server and which tool needs which: the one table the gate and the tools share."""

from __future__ import annotations

READ = "notes:read"
WRITE = "notes:write"
ADMIN = "notes:admin"
OFFLINE_ACCESS = "offline_access"

SUPPORTED = (READ, WRITE, ADMIN, OFFLINE_ACCESS)
# What an unauthenticated request is told to ask for: enough for everyday use, so the admin tool has
# to ask for more (step-up) instead of every sign-in granting it up front.
EVERYDAY = (READ, WRITE)
# What a sign-in that names no scope is granted.
DEFAULT = EVERYDAY

TOOL_SCOPES: dict[str, tuple[str, ...]] = {
    "whoami": (),
    "list_notes": (READ,),
    "add_note": (WRITE,),
    "delete_all_notes": (ADMIN,),
}


def missing_scopes(tool: str, granted: list[str]) -> list[str]:
    """The scopes a call of `tool` needs that `granted` lacks (an unknown tool needs none here)."""
    return [scope for scope in TOOL_SCOPES.get(tool, ()) if scope not in granted]
