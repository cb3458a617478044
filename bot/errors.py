"""Typed errors. Each carries a message a user (or an operator) can act on."""

from __future__ import annotations

from typing import Literal

from bot.types.inputs import InputRequest


class NerveError(Exception):
    """Base of every error nerve raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(NerveError):
    """A setting or the servers file is wrong; raised at start, naming the file and field."""


class StartupError(NerveError):
    """A front end could not start: its platform is unreachable or refused us. Reported in one line."""


class LLMError(NerveError):
    """The model service failed in a way retries did not fix. `retry_after`: the pause it asked for,
    longer than a turn waits; `headline`: what happened without its words (`message` keeps them)."""

    def __init__(
        self, message: str, *, retry_after: float | None = None, headline: str | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.headline = headline or message


class LLMRateLimited(LLMError):
    """The model service kept answering 429 past our retry budget."""


class LLMUnavailable(LLMError):
    """The model service could not be reached, timed out, or kept failing with 5xx."""


class ContextTooLong(LLMError):
    """The request exceeded the model's context window."""


class ImagesRefused(LLMError):
    """The model service refused a request because it carried images (a model that cannot see):
    with NERVE_VISION=auto the turn asks again without them (`bot.files.vision`). `model`: the name
    of the configured model that refused, set by the model chain (None from a lone client)."""

    model: str | None = None


class StreamCut(LLMError):
    """A streamed answer broke off after some was shown: retrying would show it again, so the turn
    ends with `partial` and a note."""

    def __init__(self, message: str, *, partial: str) -> None:
        super().__init__(message)
        self.partial = partial


# What a turn was doing when its time ran out: waiting for the model, or running a round's tool calls.
TurnStep = Literal["model", "tools"]


class TurnOverdue(NerveError):
    """A turn's model work took longer than NERVE_TURN_DEADLINE; `step` says what was still running."""

    def __init__(self, seconds: float, step: TurnStep) -> None:
        super().__init__(f"the turn did not finish within {seconds:g} s (still waiting for the {step})")
        self.seconds = seconds
        self.step = step


# What a schedule error is about: the tools' arguments (`at`, `repeat`, `timezone`) it names.
ScheduleField = Literal["at", "repeat", "timezone"]


class ScheduleError(NerveError):
    """A schedule cannot be made as asked: its time, recurrence rule or time zone is wrong, or its runs
    come too close together. The message says what to write instead; `field` names the argument."""

    def __init__(self, message: str, *, field: ScheduleField) -> None:
        super().__init__(message)
        self.field = field


class StoreError(NerveError):
    """The conversation store could not read or write."""


class PromptError(NerveError):
    """A server's prompt could not be started (unknown name, a missing argument, the server failed)."""


class SignInError(NerveError):
    """Signing in to a server did not work out (refused, abandoned, or the server kept saying no)."""


class SignInFailed(NerveError):
    """The browser came back, but the sign-in cannot be finished; the message says what to do."""


class AskError(NerveError):
    """An answer to an ask nerve cannot take (unknown, answered already, expired); `request` is its
    question or link when still known, so a front end can take its buttons off."""

    def __init__(self, message: str, *, request: InputRequest | None = None) -> None:
        super().__init__(message)
        self.request = request


class AskGone(AskError):
    """No ask has this id (never asked, or its conversation was reset): nothing to answer."""


class AskExpired(AskError):
    """The ask ran out of time before this answer came; the turn went on (or goes on) without it."""


class FileRefused(NerveError):
    """A shared file nerve will not read (too big, too many, a type it does not read, unparsable);
    `message` names the file and the limit or the reason, for the person who shared it."""


class FileTooBig(FileRefused):
    """A shared file is longer than the per-file limit (raised by a front end's fetch as it reads)."""


class FileUnreadable(FileRefused):
    """A shared file's platform would not give its bytes (gone, forbidden, a host nerve does not trust)."""
