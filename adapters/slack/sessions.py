"""Agent sessions (Slack's Agent messaging experience): each thread the bot answers in is a session
whose status people see — `processing` while a turn works (with Slack's stop button), `active` once
the answer is out, `suspended` while a parked turn waits for a person, `closed` when they end it.

`agents.sessions.setStatus` creates the session on first use (its title and initiator count only
then) and updates it after; `agents.sessions.rename` retitles it once the topic is clear. Every call
is best effort: a status Slack refuses is logged, never fails the turn. Apps on the Assistant
experience (`SLACK_EXPERIENCE=assistant`) make none of these calls.
"""

from __future__ import annotations

import logging
import re
from typing import Literal

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.events import Turn
from adapters.slack.post import api_error
from bot.text import truncate
from bot.types import AgentReply

logger = logging.getLogger(__name__)

SessionStatus = Literal["processing", "active", "suspended", "closed"]
# agents.sessions.setStatus and agents.sessions.rename take titles of 1 to 200 characters.
TITLE_LIMIT = 200
# The title of a session whose question has no words (files alone).
UNTITLED = "Conversation with nerve"
# What Slack answers when the app did not subscribe to the stop button's event: people then see a
# loading indicator they cannot press.
NO_STOP_EVENT = "missing_agent_session_stopped_event_subscription"
_SENTENCE = re.compile(r"^(.+?[.?!])(\s|$)")


def session_title(question: str) -> str:
    """A session's first title: the question's first line, on one line, at most TITLE_LIMIT long."""
    line = next((part.strip() for part in question.splitlines() if part.strip()), "")
    line = " ".join(line.split())
    return truncate(line, TITLE_LIMIT, at_word=True)[0] if line else UNTITLED


def topic_title(question: str) -> str:
    """The title once the topic is clear: the first question's first sentence (its first line else)."""
    first = session_title(question)
    found = _SENTENCE.match(first)
    return found.group(1) if found is not None else first


def status_after(reply: AgentReply) -> SessionStatus:
    """The status a turn leaves its session in: waiting for a person, or answered."""
    return "suspended" if reply.waiting or reply.deferred else "active"


class AgentSessions:
    """Sets the session status of the threads turns answer in (nothing when `enabled` is off)."""

    def __init__(self, client: AsyncWebClient, *, enabled: bool) -> None:
        self._client = client
        self.enabled = enabled
        self._warned = False

    async def set(self, turn: Turn, status: SessionStatus, *, title: str | None = None) -> bool:
        """Set `status` on the turn's thread, creating its session with `title` if it has none yet."""
        thread = turn.reply_thread_ts
        if not self.enabled or thread is None:
            return False
        initiator = turn.incoming.user_id or None
        try:
            answer = await self._client.agents_sessions_setStatus(
                channel_id=turn.channel,
                thread_ts=thread,
                status=status,
                title=title,
                initiator_user_id=initiator if title is not None else None,
            )
        except SlackApiError as exc:
            error = api_error(exc)
            logger.warning("could not set the agent session in %s to %s: %s", turn.key, status, error)
            return False
        except Exception as exc:  # a network failure costs the status, never the turn
            logger.info("could not set the agent session in %s to %s: %s", turn.key, status, exc)
            return False
        warning = str(answer.get("warning") or "")
        if NO_STOP_EVENT in warning and not self._warned:
            self._warned = True
            logger.warning(
                "Slack shows no stop button: subscribe the app to the agent_session_stopped event "
                "(reinstall it from slack/manifest.*.yaml)"
            )
        return True

    async def start(self, turn: Turn) -> None:
        """A turn starts working: `processing`, with the session's title made from the question."""
        await self.set(turn, "processing", title=session_title(turn.incoming.text))

    async def rename(self, turn: Turn, title: str) -> None:
        """Retitle the turn's session (1 to TITLE_LIMIT characters)."""
        thread = turn.reply_thread_ts
        if not self.enabled or thread is None or not title.strip():
            return
        try:
            await self._client.agents_sessions_rename(
                channel_id=turn.channel, thread_ts=thread, title=truncate(title, TITLE_LIMIT)[0]
            )
        except SlackApiError as exc:
            logger.info("could not rename the agent session in %s: %s", turn.key, api_error(exc))
        except Exception as exc:
            logger.info("could not rename the agent session in %s: %s", turn.key, exc)

    async def answered(self, turn: Turn, reply: AgentReply, *, first: bool) -> None:
        """The answer is out: the session's next status, and (after its first answer) its topic's title."""
        await self.set(turn, status_after(reply))
        if first and turn.incoming.text:
            clear = topic_title(turn.incoming.text)
            if clear != session_title(turn.incoming.text):
                await self.rename(turn, clear)
