"""What an ask says, written once in plain words and icons: each platform renders them in its own
markup, and escapes what a server or a model wrote."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bot.types import InputRequest, PendingCall


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """An icon, the words to stress, the person they name (`by`: an id, "" for nobody) and the rest."""

    icon: str
    words: str
    by: str | None = None
    rest: str = ""

    def say(
        self, *, stress: Callable[[str], str] = str, person: Callable[[str], str] = str, capital: bool = False
    ) -> str:
        """The line in a platform's markup: `stress` the words, name the person with `person`."""
        words = self.words[:1].upper() + self.words[1:] if capital else self.words
        text = f"{self.icon} {stress(words)}"
        if self.by is not None:
            text += f" {person(self.by)}"
        return f"{text} — {self.rest}" if self.rest else text


# How a request for input ended, by its status.
_ENDED = {
    "accepted": Line(icon="✅", words="Answered"),
    "declined": Line(icon="🚫", words="Declined"),
    "cancelled": Line(
        icon="↩️", words="Cancelled", rest="closed, or its tool call ended, before it was answered"
    ),
    "expired": Line(
        icon="⌛", words="Expired", rest="not answered in time; the tool was told it was cancelled"
    ),
    "ended": Line(icon="⏹", words="Ended", rest="nerve restarted before it was answered"),
    "completed": Line(icon="✅", words="Done", rest="the server says it has finished with the link"),
}
_OPENED = Line(icon="✅", words="Opened")


def asks(request: InputRequest) -> Line:
    """What a server's request for input is, after the server's name: the headline's words."""
    if request.refused is not None:
        return Line(icon="🔒", words="asked for input nerve does not show")
    if request.mode == "url":
        return Line(icon="🔗", words="asks you to open a link")
    return Line(icon="📝", words="asks for input")


def ended(request: InputRequest, status: str) -> Line | None:
    """How a request for input ended, for its message; None for a status with no words of its own."""
    if status == "accepted" and request.mode == "url":
        return _OPENED
    return _ENDED.get(status)


def ended_words(request: InputRequest, status: str) -> str:
    """How a request for input ended, in plain words: its line, or the status itself when it has none."""
    said = ended(request, status)
    return said.say() if said is not None else status


def decided(call: PendingCall) -> Line:
    """One approval call's outcome, naming who decided it."""
    if call.status == "approved":
        return Line(icon="✅", words="approved by", by=call.decided_by or "")
    if call.status == "denied":
        return Line(icon="❌", words="denied by", by=call.decided_by or "")
    if call.status == "expired":
        return Line(icon="⌛", words="Expired", rest="not approved in time")
    return Line(icon="⏳", words="waiting for a decision")


# --- signing in ------------------------------------------------------------------------------------

NO_SIGN_INS = "No service here asks you to sign in with your own account."
SIGN_IN_FAILED = "Sorry — something went wrong on my side; please try again."
CONNECTED = "Connected with your own account:"


def sign_in_note(server: str, expires_in: float) -> str:
    """The private note beside a sign-in link, after the server's (stressed) name."""
    minutes = max(1, round(expires_in / 60))
    lasts = "1 minute" if minutes == 1 else f"{minutes} minutes"
    return (
        f"{server} works with your own account. Sign in to connect it, and I will go on.\n"
        f"This link is yours only — don't share it — and it expires in {lasts}."
    )


def disconnected(server: str, gone: bool) -> str:
    """What a Disconnect (button or command) tells the person."""
    if gone:
        return f"Disconnected from {server}: I no longer use your account there. Ask again to reconnect."
    return f"You were not connected to {server}."


def not_started(server: str, exc: Exception) -> str:
    return f"I could not start the sign-in to {server} ({type(exc).__name__}); try again later."


def since(stamp: float) -> str:
    """When a connection was made, as the connections list says it."""
    return "since " + time.strftime("%Y-%m-%d", time.gmtime(stamp))


# --- a memory to keep, a schedule to confirm ----------------------------------------------------

# The built-in tools' server names (the core's `bot.memory.tools` and `bot.schedules.tools`, which
# front ends do not import).
MEMORY_SERVER = "memory"
SCHEDULES_SERVER = "schedules"
# The calls only the person who asked decides, never `nerve ask --yes`: what is remembered about
# them, and what runs later as them.
REQUESTERS_OWN = frozenset({MEMORY_SERVER, SCHEDULES_SERVER})


@dataclass(frozen=True, slots=True, kw_only=True)
class RememberQuestion:
    """A built-in call asked as the question it is: keep this memory, or run this schedule, or not."""

    headline: str
    text: str
    yes: str = "Remember"
    no: str = "Don't remember"
    icon: str = "🧠"


def remember_question(call: PendingCall) -> RememberQuestion | None:
    """The question a memory write or a schedule is asked as; None for any other call (the generic
    wording). The core writes a schedule's card (`PendingCall.summary`): its prompt, where it runs,
    its next run times and the time zone they are in."""
    if call.summary is not None:
        summary = call.summary
        return RememberQuestion(
            headline=summary.headline, text=summary.text, yes=summary.yes, no=summary.no, icon=summary.icon
        )
    if call.server != MEMORY_SERVER or call.tool != "remember":
        return None
    for_place = call.arguments.get("about") == "here"
    headline = "Remember this for this place?" if for_place else "Remember this for you?"
    return RememberQuestion(headline=headline, text=str(call.arguments.get("text") or ""))


def remember_questions(calls: list[PendingCall] | tuple[PendingCall, ...]) -> list[RememberQuestion] | None:
    """Every call's question when every call is asked as one (the card is then all questions)."""
    asked = [remember_question(call) for call in calls]
    found = [question for question in asked if question is not None]
    return found if found and len(found) == len(asked) else None


def requesters_own(call: PendingCall) -> bool:
    """Whether only the person who asked decides this call (never an approve-all switch)."""
    return call.server in REQUESTERS_OWN


def requesters_only(calls: list[PendingCall] | tuple[PendingCall, ...]) -> bool:
    """Whether only the person who asked may decide what is still open on a card, an admin neither:
    then the card must not say an admin can."""
    pending = [call for call in calls if call.status == "pending"]
    return bool(pending) and all(requesters_own(call) for call in pending)


def questions_headline(questions: list[RememberQuestion]) -> tuple[str, str]:
    """The icon and words heading a card that is all questions."""
    icons = {question.icon for question in questions}
    icon = icons.pop() if len(icons) == 1 else "❓"
    if len(questions) == 1:
        return icon, questions[0].headline
    return icon, "Remember these?" if icon == "🧠" else "Confirm these?"
