"""Clicks on approval buttons, requests that ran out of time, and parked turns found at start-up.

A click is acked at once and worked here in the background: the core decides whether it changes
anything; if not, only the clicker sees why (an ephemeral note); if so, the approval message is
updated in place, and once every call is decided the turn goes on and answers in its thread.

A turn also parks on a server's questions; the last answer to them lets it go on through `go_on`
as well, so every way a parked turn is released (a click, an answer, an expiry, a start-up) resumes
it the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from typing import Any

from slack_sdk.errors import SlackApiError

from adapters.common.refs import parse_message_ref
from adapters.common.tasks import Spawn
from adapters.slack.approval_view import approval_message, parse_click
from adapters.slack.clicks import click_of
from adapters.slack.events import PLATFORM
from adapters.slack.jobs import Launcher
from adapters.slack.post import Poster, api_error
from adapters.slack.turns import TurnRunner
from bot.agent import Agent
from bot.types import ApprovalPrompt

logger = logging.getLogger(__name__)

CLICK_FAILED = "Sorry — something went wrong on my side with that click; please try again."
_APPROVING = frozenset({"approve", "approve_all", "always"})
_ONE_CALL = frozenset({"approve", "deny"})


class ApprovalDesk:
    """Turns clicks and expiries into decisions, message updates and resumed turns."""

    def __init__(
        self, agent: Agent, poster: Poster, runner: TurnRunner, spawn: Spawn, launch: Launcher | None = None
    ) -> None:
        self._agent = agent
        self._poster = poster
        self._runner = runner
        self._spawn = spawn
        # Where resumed turns run: a job any process takes (PostgreSQL), else a task here.
        self._launch = launch or Launcher(None, spawn)

    async def on_click(self, body: Mapping[str, Any]) -> None:
        """One `block_actions` delivery on an approval message (already acked)."""
        pressed = click_of(body)
        click = parse_click(pressed.action)
        user, channel, thread = pressed.user, pressed.channel, pressed.thread
        if click is None or user is None:
            logger.warning(
                "ignored a button click that is not an approval: %s", pressed.action.get("action_id")
            )
            return
        try:
            call_id = click.call_id
            if call_id is None and click.index is not None:
                found = await self._prompt(click.request_id)
                if found is not None and 0 <= click.index < len(found.calls):
                    call_id = found.calls[click.index].call_id
            one = click.choice in _ONE_CALL
            decision = await self._agent.decide(
                click.request_id,
                user,
                approve=click.choice in _APPROVING,
                call_id=call_id if one else None,
                shown_hash=click.shown_hash if one else None,
                remember=click.choice == "always",
            )
        except Exception:
            logger.exception("deciding approval request %s failed", click.request_id)
            await self._tell(channel, user, thread, CLICK_FAILED)
            return
        if not decision.changed:
            await self._tell(channel, user, thread, decision.note or "Nothing changed.")
            return
        if decision.ready:
            await self.go_on(click.request_id)
        elif decision.prompt is not None:
            await self.refresh(decision.prompt)

    async def refresh(self, prompt: ApprovalPrompt) -> None:
        """Redraw the approval message from the request as it stands (outcomes, who decided)."""
        where = parse_message_ref(prompt.message_ref)
        if where is None:
            return
        try:
            await self._poster.update(where[0], where[1], approval_message(prompt))
        except SlackApiError as exc:
            logger.warning("could not update approval message %s: %s", prompt.message_ref, api_error(exc))

    async def expire(self) -> list[str]:
        """Requests whose time ran out: show them expired and let their turns go on (in the background)."""
        expired = await self._agent.expire_due(PLATFORM)
        for request_id in expired:
            await self.go_on(request_id)
        return expired

    async def recover(self) -> int:
        """At start-up: resume requests decided (or expired) before a stop, and answer messages that
        waited in threads whose turn is no longer parked. Returns how many were taken up."""
        approvals = self._agent.approvals
        if approvals is None:
            return 0
        ready = await self._agent.recover_parked(PLATFORM)
        for request_id in ready:
            await self.go_on(request_id)
        waiting = await approvals.threads_with_deferred(PLATFORM)
        for key in waiting:
            await self._launch.deferred(key, partial(self._runner.answer_deferred, key))
        return len(ready) + len(waiting)

    async def go_on(self, request_id: str) -> None:
        """Let a parked turn with nothing left to wait for go on (`go_on_here`), in the background:
        as a job of its thread when jobs are shared, else as a task of this process."""
        found = await self._prompt(request_id)
        key = found.key if found is not None else None
        await self._launch.resume(request_id, key, lambda: self.go_on_here(request_id))

    async def go_on_here(self, request_id: str) -> None:
        """A parked turn with nothing left to wait for goes on: its approval message (if it has one)
        shows every call's outcome, the turn answers once in its thread — its progress sink updates
        the messages of the questions it waited on and shows any its servers ask next — and then
        the messages that waited there are answered. Nothing happens when another process took it."""
        found = await self._prompt(request_id)
        if found is not None:
            await self.refresh(found)
        await self._runner.resume(request_id)

    async def _prompt(self, request_id: str) -> ApprovalPrompt | None:
        approvals = self._agent.approvals
        found = await approvals.prompt(request_id) if approvals is not None else None
        return found[0] if found is not None else None

    async def _tell(self, channel: str | None, user: str, thread: str | None, text: str) -> None:
        """A note only the clicker sees."""
        await self._poster.tell(channel, user, text, thread)
