"""Slack's surfaces around a DM's turns: the suggested prompts shown when an assistant thread starts
or an agent app's Messages tab opens, and the Agent messaging experience's stop button.

Apart from the bot's assembly (`adapters.slack.app`) because none of these events is a turn: each
listener only starts its work in the background, and the turns it touches run in `TurnRunner`.
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.common.tasks import Spawn
from adapters.slack.events import PLATFORM, turn_in
from adapters.slack.turns import TurnRunner
from bot.types import ConversationKey, Incoming

logger = logging.getLogger(__name__)

SUGGESTED_PROMPTS = (
    {"title": "What can you do?", "message": "What can you do, and which tools do you have?"},
    {"title": "Check the environment", "message": "What is the environment status in my area?"},
)


class AssistantEvents:
    """The listeners of `assistant_thread_started`, `app_home_opened` and `agent_session_stopped`;
    `agent_experience` (SLACK_EXPERIENCE=agent) is whether the Messages tab takes the prompts."""

    def __init__(
        self, client: AsyncWebClient, turns: TurnRunner, spawn: Spawn, *, agent_experience: bool
    ) -> None:
        self.client = client
        self.turns = turns
        self.spawn = spawn
        self.agent_experience = agent_experience

    async def on_thread_started(self, event: dict[str, Any]) -> None:
        thread = event.get("assistant_thread") or {}
        channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
        if channel and thread_ts:
            self.spawn(self._suggest_prompts(str(channel), str(thread_ts)))

    async def on_home_opened(self, event: dict[str, Any]) -> None:
        # An agent app's Messages tab takes the place of the assistant container: the prompts go to
        # the channel, without thread_ts (Slack ignores a call for an agent app that names a thread).
        channel = event.get("channel")
        if event.get("tab") == "messages" and channel and self.agent_experience:
            self.spawn(self._suggest_prompts(str(channel), None))

    async def on_session_stopped(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        channel, thread = str(event.get("channel") or ""), str(event.get("thread_ts") or "")
        if not channel or not thread:
            return
        key = ConversationKey(
            platform=PLATFORM, workspace=str(body.get("team_id") or ""), channel=channel, thread=thread
        )
        # In the background: the turn may run in another process, which takes a moment to reach.
        self.spawn(self._stop(key, str(event.get("user") or "")))

    async def _stop(self, key: ConversationKey, user: str) -> None:
        outcome = await self.turns.stops.stop(key, user)
        if outcome == "stopped":
            logger.info("stop pressed in %s: its turn is cancelled", key)
            return
        if outcome == "not_yours":
            # Only the person whose turn it is, or an admin, stops it; the turn goes on as it was.
            logger.debug("stop pressed in %s by %s, whose turn it is not: ignored", key, user)
            return
        if outcome == "elsewhere":
            # The process running the turn took the stop: it answers as a stop pressed there would.
            logger.info("stop pressed in %s: passed on to the process running its turn", key)
            return
        # No turn runs anywhere (it ended): the session must still leave `processing`, which Slack
        # does not do by itself.
        logger.info("stop pressed in %s, where no turn runs", key)
        await self.turns.session_idle(turn_in(Incoming(key=key, text="", user_id=user)))

    async def _suggest_prompts(self, channel: str, thread_ts: str | None) -> None:
        try:
            await self.client.assistant_threads_setSuggestedPrompts(
                channel_id=channel, thread_ts=thread_ts, prompts=list(SUGGESTED_PROMPTS)
            )
        except SlackApiError as exc:
            logger.warning("could not set suggested prompts: %s", exc.response.get("error"))
