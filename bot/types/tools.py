"""Tools and prompts as servers offer them, and what a call produced.

Its own module because the catalog, the host and the loop trade in these, with the trust they carry
(`bot.policy.approval`), and nothing here knows of approvals, asks or turns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from bot.policy.approval import ApprovalMode, ToolHints, needs_approval
from bot.types.inputs import InputNeeded


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool as offered to the model, plus what the host needs to route and guard the call."""

    name: str
    description: str
    parameters: dict[str, Any]
    server: str
    original_name: str
    timeout: float = 30.0
    triggers: tuple[str, ...] = ()
    # Trust: the configured approval mode, what the server's annotations say, and the hash a
    # remembered "always allow here" is bound to (name, description, schema, annotations). The
    # catalog always sets the mode from the servers file (default "writes"); a spec built by hand
    # has no policy behind it and runs at once.
    approval: ApprovalMode = "never"
    hints: ToolHints = field(default_factory=ToolHints)
    # Whether the operator trusts the server's annotations (`trustAnnotations`): only then may a
    # read-only hint let a call run unasked.
    trusted_hints: bool = False
    definition_hash: str = ""

    @property
    def needs_approval(self) -> bool:
        return needs_approval(self.approval, self.hints, trusted=self.trusted_hints)

    def to_openai(self) -> dict[str, Any]:
        """Exactly name, description and parameters (S2): anything more costs tokens and confuses."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


# "changed": the tool is not the one the call was checked against (its definition changed, it vanished
# or moved to another name); the model may call it again as it is offered now.
ToolErrorKind = Literal[
    "arguments", "unknown_tool", "changed", "execution", "timeout", "unavailable", "rate_limited"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    """A resource a tool returned, for people: a link to open (`link`, at `uri`), a text, or a file
    (`data`, bounded by the host; one too large to carry is a note in `text`)."""

    uri: str
    name: str
    mime_type: str | None = None
    link: bool = False
    text: str | None = None
    data: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool call produced. Failures are data, not exceptions: the loop decides what to do.
    For one, `content` is the text for the model; `detail` what went wrong, in words for people."""

    content: str
    is_error: bool = False
    detail: str = ""
    error_kind: ToolErrorKind | None = None
    structured: Any = None
    retry_after: float | None = None
    latency_ms: float = 0.0
    # Links, texts and files the result carried, shown to people beside the answer.
    resources: tuple[Resource, ...] = ()
    # Not a result yet: the server needs people's input first (only for a call that may park).
    needs_input: InputNeeded | None = None
    # Not a result yet: the person must sign in to the call's server first (per-person OAuth).
    needs_sign_in: SignInNeeded | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SignInNeeded:
    """The person must sign in (again) to the call's per-person server: where to send their browser.
    `url` carries a single-use state bound to the person and the server: shown to that person only."""

    server: str
    person: str
    url: str
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptSpec:
    """A prompt a server offers, as people start it: `/prompt <name> [arguments]`."""

    name: str
    server: str
    original_name: str
    title: str
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()
