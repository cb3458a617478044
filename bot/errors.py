"""Typed errors. Each carries a message a user (or an operator) can act on."""

from __future__ import annotations


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
    """The model service failed in a way retries did not fix."""


class LLMRateLimited(LLMError):
    """The model service kept answering 429 past our retry budget."""


class LLMUnavailable(LLMError):
    """The model service could not be reached, timed out, or kept failing with 5xx."""


class ContextTooLong(LLMError):
    """The request exceeded the model's context window."""


class StoreError(NerveError):
    """The conversation store could not read or write."""
