"""Values passed between nerve's modules.

Frozen dataclasses, so a message cannot change after it was persisted or sent, and so adapters,
the agent and the store agree on one shape without importing each other.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.forms import Form
from bot.policy.approval import ApprovalMode, ToolHints, needs_approval
from bot.policy.scopes import Place

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationKey:
    """Where a conversation lives: one thread on one platform.

    A DM uses the user's DM channel; the platform's ids make two users' DMs distinct keys, so one
    person's history can never be loaded into another person's conversation.
    """

    platform: str
    workspace: str
    channel: str
    thread: str

    def __str__(self) -> str:
        return f"{self.platform}:{self.workspace}:{self.channel}:{self.thread}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Incoming:
    """A user's message, parsed from the platform payload at the adapter's edge."""

    key: ConversationKey
    text: str
    user_id: str
    user_name: str = ""
    # The platform's id for this delivery; the store uses it to make a re-delivered message a no-op.
    event_id: str | None = None
    # Where it was written, for scopes and remembered approvals; None: derived from the key.
    place: Place | None = None
    # Received before a restart and answered only now: it waits for a turn slot however long the
    # queue is, never told "busy" (its person already waited through the restart).
    replayed: bool = False

    def where(self) -> Place:
        """The place the policy sees: the adapter's, or the key's channel with this user."""
        if self.place is not None:
            return self.place
        return Place(platform=self.key.platform, channel=self.key.channel, user=self.user_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call as the model wrote it. `arguments` stays the raw JSON string the model sent."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatMessage:
    """One message of a conversation in the chat-completions shape.

    Tool messages also carry what the store records about the call (error flag, latency); those
    fields never reach the model.
    """

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    latency_ms: float | None = None

    def to_openai(self) -> dict[str, Any]:
        """The wire form the chat-completions API accepts."""
        out: dict[str, Any] = {"role": self.role}
        if self.role == "assistant":
            out["content"] = self.content
            if self.tool_calls:
                out["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        elif self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
            out["content"] = self.content or ""
        else:
            out["content"] = self.content or ""
        return out


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
        """True when a call must wait for a person before it runs."""
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
    """A resource a tool returned, for people: a link to open, a text to read, or a file to keep.

    Exactly one of `link` (a resource link: `uri` is where it lives), `text` or `data` holds it.
    `data` is bounded by the host; a file too large to carry is a link-less note in `text`.
    """

    uri: str
    name: str
    mime_type: str | None = None
    link: bool = False
    text: str | None = None
    data: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """What a tool call produced. Failures are data, not exceptions: the loop decides what to do.

    For a failure, `content` is the full text for the model; `detail` says only what went wrong, in
    words fit for people ("it did not answer within 30 s"), without instructions such as "try again".
    """

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
    """A call's server acts for each person with their own account, and this person has not signed
    in (or their sign-in ended): where to send their browser. `url` carries a single-use state bound
    to the person and the server, so it is shown to that person only."""

    server: str
    person: str
    url: str
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One answer from the model, with the usage the server reported (if it did)."""

    message: ChatMessage
    usage: Usage | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """One tool call of a turn, for the adapter to show as a collapsible detail.

    Everything here is for people: `content` is the tool's result, or for a failed call what went
    wrong; the instructions the model got with a failure ("call it again with …") are never here.
    """

    tool_call_id: str
    name: str
    arguments: dict[str, Any]
    is_error: bool
    latency_ms: float
    summary: str
    content: str
    truncated: bool = False
    # Links to show as links, texts as their own collapsible details, files to upload.
    resources: tuple[Resource, ...] = ()
    # The server the call went to (or was meant for); None when no server was reached or known.
    server: str | None = None

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)

    @property
    def label(self) -> str:
        """The call's name with its server beside it, so people see where each call went."""
        return f"{self.name} · {self.server}" if self.server else self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentReply:
    """A platform-neutral answer: markdown text plus one attachment per tool call."""

    text: str
    attachments: tuple[Attachment, ...] = ()
    usage: Usage = field(default_factory=Usage)
    cut_short: bool = False
    # The model service failed: `text` is an apology, not an answer (scripts may exit non-zero).
    failed: bool = False
    # The turn is parked until a person decides on these calls; `text` says so.
    approval: ApprovalPrompt | None = None
    # The thread has a turn waiting for a person; this message waits behind it (stored, not lost).
    deferred: bool = False
    # The turn is parked until people answer these (approvals, questions, links, sign-ins).
    waiting: tuple[Ask, ...] = ()


CallDecision = Literal["pending", "approved", "denied", "expired"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """One call waiting for a person, exactly as it will run if approved."""

    call_id: str
    server: str
    # The tool's name on its server (what the servers file and remembered approvals name).
    tool: str
    arguments: dict[str, Any]
    call_hash: str
    status: CallDecision = "pending"
    decided_by: str | None = None
    # The tool's definition when the call was shown: it runs only while the tool is still that.
    definition_hash: str = ""

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False, indent=2)


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalPrompt:
    """What an approval message shows: the calls, why the model wants them, who may decide, until when."""

    request_id: str
    key: ConversationKey
    requester: str
    # The place "always allow here" applies to (`bot.policy.places.place_id`).
    place: str
    calls: tuple[PendingCall, ...]
    # What the model wrote next to its calls, if anything (often why it wants them).
    reason: str
    expires_at: float
    # Where the approval message was posted (platform-specific), so any process can update it.
    message_ref: str | None = None
    # Calls of the same round that wait for answers to their server's questions (not shown here).
    questions_open: bool = False

    @property
    def open(self) -> bool:
        """True while a call still waits for a decision, or for an answer to a question."""
        return self.questions_open or any(call.status == "pending" for call in self.calls)


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One decision on a tool call: by a person (their id) or automatic ("auto: read-only", …)."""

    who: str
    place: str
    server: str
    tool: str
    call_id: str
    arguments_hash: str
    outcome: str
    at: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class RememberedApproval:
    """An "always allow here": this tool in this place, while its definition keeps this hash."""

    place: str
    server: str
    tool: str
    definition_hash: str
    granted_by: str
    granted_at: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What a click did: `note` (for the clicker only) says why nothing changed; `ready` means every
    call is decided and the turn can go on (`Agent.resume`)."""

    changed: bool
    prompt: ApprovalPrompt | None
    note: str | None = None
    ready: bool = False
    # The calls this click decided.
    decided: tuple[str, ...] = ()


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


InputMode = Literal["form", "url"]
InputAction = Literal["accept", "decline", "cancel"]
InputStatus = Literal["open", "accepted", "declined", "cancelled", "expired", "ended", "completed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InputDraft:
    """What a server asked for during a call, before nerve shows it (MCP elicitation, either mode)."""

    message: str
    mode: InputMode
    schema: dict[str, Any] | None = None
    url: str | None = None
    # URL mode: the server's id, echoed in its completion notification.
    elicitation_id: str | None = None
    # The call(s) it may come from (see `bot.mcp.callers`).
    tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InputNeeded:
    """A call's server needs input before it can answer (2026-07-28): its questions by the server's
    keys, and the opaque state to send back with the answers when the call is made again."""

    request_state: str | None
    questions: tuple[tuple[str, InputDraft], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class InputAnswer:
    """The reply a server gets: `content` only with "accept" in form mode."""

    action: InputAction
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequest:
    """A server's question as shown to people: only `user_id` (who started the turn) may answer.

    `tools` names the call(s) it came from: one when known exactly, several when an older server
    asked while more than one of this person's calls to it were running. `refused` says why nerve
    did not show a form (it asked for a secret); such a request is already answered "decline".
    """

    request_id: str
    key: ConversationKey
    user_id: str
    server: str
    tools: tuple[str, ...]
    message: str
    mode: InputMode
    form: Form | None = None
    url: str | None = None
    refused: str | None = None
    expires_at: float = 0.0
    # Where the front end posted it (`Agent.input_posted`), so any process can update that message.
    message_ref: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputOutcome:
    """What an answer did. `note` is for the person who answered only (ephemeral); `errors` holds a
    message per field when the form was refused as filled in (the form stays open)."""

    changed: bool
    request: InputRequest | None
    status: InputStatus | None = None
    note: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    # The parked turn this answer let go on: the front end resumes it (`Agent.resume`) and posts
    # the answer, as after the last approval click.
    resume: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InputResume:
    """The answers to a parked call's questions, by the server's keys, and the state it gave."""

    request_state: str | None
    answers: tuple[tuple[str, InputAnswer], ...]


# A call's way back to the person: the server asks (`ask`), or reports progress (`report`:
# progress, total or None, message or None).
AskPerson = Callable[[InputDraft], Awaitable[InputAnswer]]
Report = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """Who a tool call runs for, so what its server asks or reports mid-call reaches them."""

    tool: str
    # Calls of one owner (conversation and person) may share a question an older server cannot
    # attribute to one call; calls of different owners never do.
    owner: str
    # The person the call acts for, across conversations (`bot.mcp.auth.people.person_of`): whose
    # sign-in a per-person server's call uses. Empty: nobody's (the server's shared identity only).
    person: str = ""
    ask: AskPerson | None = None
    report: Report | None = None
    # The server finished what a link it asked people to open was for (URL mode): its id.
    completed: Callable[[str], Awaitable[None]] | None = None
    # A server that asks in its result (2026-07-28) may have the call parked (`ToolResult.needs_input`)
    # instead of asked while it waits; `resume` makes the call again with the answers.
    park: bool = False
    resume: InputResume | None = None


AskKind = Literal["approval", "question", "link", "sign_in"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ask:
    """Something the core asks a person, of any kind, in one shape: front ends show it, and answer
    it with `Agent.answer(ask.id, person, answer)` whatever it is.

    `id` is the kind's own request id (an approval's request, a question's or link's request, a
    sign-in's single-use state); `person` is who may answer (for an approval, admins may too).
    Exactly one of `approval`, `input` (a question or a link) and `sign_in` is the payload.
    """

    kind: AskKind
    id: str
    key: ConversationKey
    person: str
    expires_at: float
    approval: ApprovalPrompt | None = None
    input: InputRequest | None = None
    sign_in: SignInNeeded | None = None

    @classmethod
    def of_approval(cls, prompt: ApprovalPrompt) -> Ask:
        return cls(
            kind="approval",
            id=prompt.request_id,
            key=prompt.key,
            person=prompt.requester,
            expires_at=prompt.expires_at,
            approval=prompt,
        )

    @classmethod
    def of_input(cls, request: InputRequest) -> Ask:
        return cls(
            kind="link" if request.mode == "url" else "question",
            id=request.request_id,
            key=request.key,
            person=request.user_id,
            expires_at=request.expires_at,
            input=request,
        )

    @classmethod
    def of_sign_in(cls, sign_in: SignInNeeded, key: ConversationKey, expires_at: float) -> Ask:
        return cls(
            kind="sign_in",
            id=sign_in.state,
            key=key,
            person=sign_in.person,
            expires_at=expires_at,
            sign_in=sign_in,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Approve:
    """Run the call `call_id` (every open one when None), as shown (`shown_hash`); `remember`
    also always allows its tool in the request's place."""

    call_id: str | None = None
    shown_hash: str | None = None
    remember: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Deny:
    """Do not run the call `call_id` (every open one when None)."""

    call_id: str | None = None
    shown_hash: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Submit:
    """A question's form filled in (checked against the form; a wrong field keeps it open)."""

    values: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkOpened:
    """The person opened a link they were asked to and did what it was for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Decline:
    """The person said no to a question or a link."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    """The person dismissed a question or a link without answering."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SignInFinished:
    """The browser came back from a sign-in with what the server's sign-in service said."""

    code: str | None = None
    iss: str | None = None
    error: str | None = None


Answer = Approve | Deny | Submit | LinkOpened | Decline | Cancel | SignInFinished


@dataclass(frozen=True, slots=True, kw_only=True)
class Answered:
    """What an answer did. `note` says, for the person who answered only, why nothing changed;
    `errors` holds a message per field of a form refused as filled in (the form stays open);
    `resume` names the parked turn this answer let go on (the front end calls `Agent.resume`).
    `decision` and `input` are the kind's own outcome, for front ends that show more of it."""

    changed: bool
    note: str | None = None
    errors: dict[str, str] = field(default_factory=dict)
    resume: tuple[str, ...] = ()
    decision: Decision | None = None
    input: InputOutcome | None = None


TurnEventKind = Literal[
    "thinking",
    "text",
    "tool_started",
    "tool_finished",
    "tool_progress",
    "retrying",
    "notice",
    "input_needed",
    "input_done",
    "sign_in_needed",
    "ask",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnEvent:
    """Progress during a turn, for adapters to show ("calling get_environment_status…").

    - "thinking": a model round starts; text shown for an earlier round is superseded (it was a
      draft next to tool calls, or one the model was asked to reconsider).
    - "text": `message` is the next piece of the answer as the model writes it; the pieces of one
      round joined are its text so far. The final `AgentReply.text` is what to keep.
    - "tool_started" / "tool_finished": one call (`tool`, `tool_call_id`, the `server` it goes to;
      `ok` when finished).
    - "tool_progress": a running call's server reported progress (`message`, `fraction` 0..1 when
      it knows the total).
    - "retrying" (`retry_in` seconds) and "notice": a status line for people.
    - "input_needed": a server asks `input.user_id` for input (`input`); show the form or link.
      "input_done": it was answered, declined, cancelled or expired (`input`, `message` says which);
      take the buttons off. For a link, a later "input_done" with `message` "completed" says the
      server finished what the link was for.
    - "sign_in_needed": the turn waits for `sign_in.person` to sign in to `sign_in.server`; show
      them (only them: the link is theirs) a button to `sign_in.url`.
    - "ask": the turn asks a person something (`ask`), whatever its kind: every approval, question,
      link and sign-in is announced this way, and answered with `Agent.answer`. (The kinds above
      that carry an input or a sign-in are still sent beside it while front ends move over.)

    Sinks are awaited in the turn's path: they should only record and return (throttle elsewhere).
    """

    kind: TurnEventKind
    message: str
    tool: str | None = None
    tool_call_id: str | None = None
    ok: bool | None = None
    retry_in: float | None = None
    fraction: float | None = None
    input: InputRequest | None = None
    sign_in: SignInNeeded | None = None
    server: str | None = None
    ask: Ask | None = None


Progress = Callable[[TurnEvent], Awaitable[None]]


async def no_progress(event: TurnEvent) -> None:
    """A Progress sink that shows nothing (one-shot runs, benchmarks)."""
