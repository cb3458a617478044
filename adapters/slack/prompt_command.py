"""`/nerve prompt NAME [arg=value …]`: a server's prompt started from Slack, answered like a mention.

A slash command has no message to answer in a thread, so the bot posts the prompt's text, naming who
started it, and claims that post in the inbox as that person's mention: the same runner answers it,
with approvals, follow-ups in the thread and answering after a restart. `/nerve prompts` lists what
can be started here. Mistakes are told only to the person who typed the command: in the
acknowledgement when the server answers within Slack's 3 seconds, else privately.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.prompt_arguments import parse_arguments, usage
from adapters.slack.commands import prompts_text, typed_in
from adapters.slack.events import (
    PLATFORM,
    Identity,
    Turn,
    classify,
    inbox_payload,
    place_of_command,
    unescape,
)
from adapters.slack.post import Poster, api_error
from adapters.slack.render import OutMessage, escape, escape_capped
from bot.agent import Agent
from bot.errors import PromptError
from bot.types import Incoming

logger = logging.getLogger(__name__)

# How long the acknowledgement waits for the server's text (Slack wants it within 3 s): a refusal
# that arrives in time goes back in it; a slower server is waited for after it.
ACK_WAIT = 2.0
# How much of the prompt's text the post in the channel shows (the model gets all of it).
SHOWN_CHARS = 2800
FAILED = "Sorry — I could not start that prompt; please try again."
_USER_ID = re.compile(r"[A-Z0-9]+")


def announcement(user: str, name: str, question: str) -> OutMessage:
    """The post a started prompt is answered under: who started which prompt, and its text."""
    who = f"<@{user}>" if _USER_ID.fullmatch(user) else escape(user)
    return OutMessage(
        text=f"{who} started the prompt {escape(name)}: {escape_capped(question, SHOWN_CHARS)}", blocks=[]
    )


def as_mention(team: str, channel: str, user: str, ts: str, question: str, *, dm: bool) -> dict[str, Any]:
    """The post as the Events API body of a mention of the bot by `user`, the inbox's replay form.

    The text is escaped as Slack escapes what people type, so `classify` hands the model exactly
    the prompt's text. In a DM (where mentions are not events) it is a message in the post's thread.
    """
    event: dict[str, Any] = {
        "type": "message" if dm else "app_mention",
        "user": user,
        "channel": channel,
        "ts": ts,
        "team": team,
        "text": question.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"),
    }
    if dm:
        event["channel_type"] = "im"
        event["thread_ts"] = ts
    return {"type": "event_callback", "event_id": f"prompt:{channel}:{ts}", "team_id": team, "event": event}


@dataclass(eq=False)
class PromptCommand:
    """Lists and starts prompts for `/nerve`; a started prompt is handed to `start` as a turn."""

    agent: Agent
    poster: Poster
    identity: Callable[[], Awaitable[Identity]]
    start: Callable[[Turn], None]
    spawn: Callable[[Coroutine[Any, Any, None]], None]

    async def on_command(self, ack: AsyncAck, command: Mapping[str, Any], words: list[str]) -> None:
        """`/nerve prompt …` or `/nerve prompts`, acknowledged within Slack's 3 seconds (the
        arguments are read from the command's text, where quoted values keep their spaces)."""
        sub, rest = _first_word(unescape(str(command.get("text") or "")))
        name, written = _first_word(rest)
        channel = str(command.get("channel_id") or "")
        user = str(command.get("user_id") or "")
        place = place_of_command(channel, command.get("channel_name"), user)
        here = typed_in(place, str(command.get("team_id") or ""))
        if sub.lower() == "prompts" or not name:
            await ack(text=prompts_text(self.agent, here), response_type="ephemeral")
            return
        spec = next((p for p in self.agent.prompts(here) if p.name == name), None)
        hint = f"\nWrite it as `/nerve prompt {escape(usage(spec))}`." if spec is not None else ""
        try:
            # An unknown name is left to the core, which names the prompts there are.
            arguments = parse_arguments(spec, written) if spec is not None else {}
        except PromptError as exc:
            await ack(text=escape(str(exc)) + hint, response_type="ephemeral")
            return
        question = asyncio.ensure_future(self.agent.prompt_question(here, name, arguments))
        try:
            done, _ = await asyncio.wait({question}, timeout=ACK_WAIT)
        except asyncio.CancelledError:
            question.cancel()
            raise
        if done and question.exception() is not None:
            refused = question.exception()
            if not isinstance(refused, PromptError):
                logger.error("starting the prompt %s failed", name, exc_info=refused)
            text = escape(str(refused)) + hint if isinstance(refused, PromptError) else FAILED
            await ack(text=text, response_type="ephemeral")
            return
        await ack()
        tell = PrivateNote(self.poster, here, str(command.get("response_url") or ""))
        self.spawn(self._begin(question, here, name, hint, tell))

    async def _begin(
        self, question: asyncio.Future[str], here: Incoming, name: str, hint: str, tell: PrivateNote
    ) -> None:
        """Post the prompt's text, claim the post as a mention, and start its turn."""
        place = here.where()
        channel, user = place.channel or "", here.user_id
        try:
            text = await question
        except PromptError as exc:
            await tell(escape(str(exc)) + hint)
            return
        except Exception:
            logger.exception("starting the prompt %s failed", name)
            await tell(FAILED)
            return
        try:
            ts = await self.poster.post(channel, None, announcement(user, name, text))
        except SlackApiError as exc:
            logger.warning("could not post the prompt %s in %s: %s", name, channel, api_error(exc))
            await tell(f"I cannot post in this channel ({api_error(exc)}): invite me first.")
            return
        body = as_mention(here.key.workspace, channel, user, ts, text, dm=place.dm)
        me = await self.identity()
        turn = classify(body, me, allow_bots=True, follow_threads=True, followed=lambda _key: True)
        if turn is None:
            logger.error("the post of the prompt %s in %s is not a turn", name, channel)
            return
        if await self.agent.inbox.claim_event(PLATFORM, turn.event_id, inbox_payload(body)):
            self.start(turn)


def _first_word(text: str) -> tuple[str, str]:
    """The first word of `text` and the rest, whatever whitespace separates them."""
    parts = text.split(None, 1)
    return (parts[0] if parts else ""), (parts[1] if len(parts) > 1 else "")


class PrivateNote:
    """Telling only the person who typed the command, after its acknowledgement: an ephemeral
    message, or, where the bot may not post (a channel it was not invited to), the command's
    response URL, which Slack accepts for 30 minutes wherever the command was typed."""

    def __init__(self, poster: Poster, here: Incoming, response_url: str) -> None:
        self._poster = poster
        self._channel = here.where().channel or ""
        self._user = here.user_id
        self._response_url = response_url

    async def __call__(self, text: str) -> None:
        try:
            await self._poster.client.chat_postEphemeral(channel=self._channel, user=self._user, text=text)
            return
        except SlackApiError as exc:
            logger.info(
                "no ephemeral message in %s (%s); using the response URL", self._channel, api_error(exc)
            )
        if not self._response_url:
            return
        try:
            sent = await AsyncWebhookClient(self._response_url, timeout=10).send(
                text=text, response_type="ephemeral"
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            logger.warning("could not tell %s about the prompt: %s", self._user, exc)
            return
        if sent.status_code != 200:
            logger.warning("could not tell %s about the prompt: HTTP %s", self._user, sent.status_code)
