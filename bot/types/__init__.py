"""Values passed between nerve's modules.

Frozen dataclasses, so a message cannot change after it was persisted or sent. Named here with the
ground floor's values the front ends hold (platforms, places, forms), so a front end needs no door
into `bot.policy` or `bot.forms`.
"""

from bot.forms import REQUIRED as REQUIRED
from bot.forms import FieldError as FieldError
from bot.forms import FieldValue as FieldValue
from bot.forms import Form as Form
from bot.forms import FormField as FormField
from bot.forms import check_answer as check_answer
from bot.forms import describe_field as describe_field
from bot.forms import parse_field as parse_field
from bot.policy.platforms import Platform as Platform
from bot.policy.platforms import Platforms as Platforms
from bot.policy.scopes import Place as Place
from bot.types.asks import Answer as Answer
from bot.types.asks import Answered as Answered
from bot.types.asks import ApprovalPrompt as ApprovalPrompt
from bot.types.asks import Approve as Approve
from bot.types.asks import Ask as Ask
from bot.types.asks import AuditEntry as AuditEntry
from bot.types.asks import CallDecision as CallDecision
from bot.types.asks import CallSummary as CallSummary
from bot.types.asks import Cancel as Cancel
from bot.types.asks import Decision as Decision
from bot.types.asks import Decline as Decline
from bot.types.asks import Deny as Deny
from bot.types.asks import LinkOpened as LinkOpened
from bot.types.asks import PendingCall as PendingCall
from bot.types.asks import Proposal as Proposal
from bot.types.asks import RememberedApproval as RememberedApproval
from bot.types.asks import SignedIn as SignedIn
from bot.types.asks import SignInFinished as SignInFinished
from bot.types.asks import Submit as Submit
from bot.types.conversation import ChatMessage as ChatMessage
from bot.types.conversation import Completion as Completion
from bot.types.conversation import ConversationKey as ConversationKey
from bot.types.conversation import Incoming as Incoming
from bot.types.conversation import ToolCall as ToolCall
from bot.types.conversation import Usage as Usage
from bot.types.inputs import CallContext as CallContext
from bot.types.inputs import InputAction as InputAction
from bot.types.inputs import InputAnswer as InputAnswer
from bot.types.inputs import InputDraft as InputDraft
from bot.types.inputs import InputMode as InputMode
from bot.types.inputs import InputNeeded as InputNeeded
from bot.types.inputs import InputOutcome as InputOutcome
from bot.types.inputs import InputRequest as InputRequest
from bot.types.inputs import InputResume as InputResume
from bot.types.inputs import InputStatus as InputStatus
from bot.types.inputs import Report as Report
from bot.types.memories import Memory as Memory
from bot.types.memories import MemoryKind as MemoryKind
from bot.types.memories import UndoOutcome as UndoOutcome
from bot.types.people import Author as Author
from bot.types.people import Person as Person
from bot.types.schedules import RunStatus as RunStatus
from bot.types.schedules import Schedule as Schedule
from bot.types.schedules import ScheduleChange as ScheduleChange
from bot.types.schedules import ScheduleRun as ScheduleRun
from bot.types.schedules import ScheduleStatus as ScheduleStatus
from bot.types.tools import PromptArgument as PromptArgument
from bot.types.tools import PromptSpec as PromptSpec
from bot.types.tools import Resource as Resource
from bot.types.tools import SignInNeeded as SignInNeeded
from bot.types.tools import ToolErrorKind as ToolErrorKind
from bot.types.tools import ToolResult as ToolResult
from bot.types.tools import ToolSpec as ToolSpec
from bot.types.turns import AgentReply as AgentReply
from bot.types.turns import Attachment as Attachment
from bot.types.turns import Progress as Progress
from bot.types.turns import Remembered as Remembered
from bot.types.turns import TurnEvent as TurnEvent
from bot.types.turns import TurnEventKind as TurnEventKind
from bot.types.turns import no_progress as no_progress
