"""Values passed between nerve's modules.

Frozen dataclasses, so a message cannot change after it was persisted or sent, and so adapters,
the agent and the store agree on one shape without importing each other. One module per kind of
value; this package names them all, so `from bot.types import …` is the one way to reach them.
It also names the values of the ground floor the front ends hold: the platforms they describe to
the core (`Platform`, `Platforms`), the place a conversation happens in (`Place`) and the form a
person fills in, with the pure functions that describe and check its fields, so a front end needs
no door into `bot.policy` or `bot.forms`.
"""

from bot.forms import (
    REQUIRED,
    FieldError,
    FieldValue,
    Form,
    FormField,
    check_answer,
    describe_field,
    parse_field,
)
from bot.policy.platforms import Platform, Platforms
from bot.policy.scopes import Place
from bot.types.approvals import (
    ApprovalPrompt,
    AuditEntry,
    CallDecision,
    Decision,
    PendingCall,
    RememberedApproval,
)
from bot.types.asks import (
    Answer,
    Answered,
    Approve,
    Ask,
    AskKind,
    Cancel,
    Decline,
    Deny,
    LinkOpened,
    SignedIn,
    SignInFinished,
    Submit,
)
from bot.types.conversation import ChatMessage, Completion, ConversationKey, Incoming, Role, ToolCall, Usage
from bot.types.inputs import (
    AskPerson,
    CallContext,
    InputAction,
    InputAnswer,
    InputDraft,
    InputMode,
    InputNeeded,
    InputOutcome,
    InputRequest,
    InputResume,
    InputStatus,
    Report,
)
from bot.types.tools import (
    PromptArgument,
    PromptSpec,
    Resource,
    SignInNeeded,
    ToolErrorKind,
    ToolResult,
    ToolSpec,
)
from bot.types.turns import AgentReply, Attachment, Progress, TurnEvent, TurnEventKind, no_progress

__all__ = [
    "REQUIRED",
    "AgentReply",
    "Answer",
    "Answered",
    "ApprovalPrompt",
    "Approve",
    "Ask",
    "AskKind",
    "AskPerson",
    "Attachment",
    "AuditEntry",
    "CallContext",
    "CallDecision",
    "Cancel",
    "ChatMessage",
    "Completion",
    "ConversationKey",
    "Decision",
    "Decline",
    "Deny",
    "FieldError",
    "FieldValue",
    "Form",
    "FormField",
    "Incoming",
    "InputAction",
    "InputAnswer",
    "InputDraft",
    "InputMode",
    "InputNeeded",
    "InputOutcome",
    "InputRequest",
    "InputResume",
    "InputStatus",
    "LinkOpened",
    "PendingCall",
    "Place",
    "Platform",
    "Platforms",
    "Progress",
    "PromptArgument",
    "PromptSpec",
    "RememberedApproval",
    "Report",
    "Resource",
    "Role",
    "SignInFinished",
    "SignInNeeded",
    "SignedIn",
    "Submit",
    "ToolCall",
    "ToolErrorKind",
    "ToolResult",
    "ToolSpec",
    "TurnEvent",
    "TurnEventKind",
    "Usage",
    "check_answer",
    "describe_field",
    "no_progress",
    "parse_field",
]
