"""`/nerve forget me` and `/nerve export` on Slack: a person's data rights, in a DM with nerve only
(what is said about their data is said to them alone).

Forgetting is asked first: an ephemeral question whose Delete button carries the asker's user id, so
a press works in whichever process receives it, after a restart too, and only the asker's press
counts. The export is one JSON file uploaded to their DM. What is stored and deleted is the façade's
to decide (`Agent.forget_person`, `Agent.export_person`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from adapters.common import rights
from adapters.common.tasks import Spawn
from adapters.slack.clicks import tell_presser
from adapters.slack.events import typed_in
from adapters.slack.post import Poster
from adapters.slack.render import Upload, button, escape, section
from bot.agent import Agent
from bot.types import Incoming

logger = logging.getLogger(__name__)

RIGHTS_ACTION = "nerve_rights"
RIGHTS_ACTIONS = re.compile(rf"^{RIGHTS_ACTION}\.")
IN_A_DM = "For your privacy, `/nerve {what}` works only in a DM with me: open one and type it there."
FORGET_USAGE = "To delete everything stored about you, type `/nerve forget me` in a DM with me."
EXPORTING = "Putting your data together: the file arrives in this DM in a moment."


def _button(text: str, what: str, user: str, style: str | None = None) -> dict[str, Any]:
    return button(text, f"{RIGHTS_ACTION}.{what}", user, style)


def forget_question(user: str) -> tuple[str, list[dict[str, Any]]]:
    """The question `/nerve forget me` asks first, with its Delete and Cancel buttons for `user`."""
    buttons = [
        _button(rights.CONFIRM_FORGET, "forget", user, "danger"),
        _button(rights.CANCEL_FORGET, "cancel", user),
    ]
    return rights.FORGET_QUESTION, [
        section(escape(rights.FORGET_QUESTION)),
        {"type": "actions", "elements": buttons},
    ]


@dataclass(eq=False)
class SlackRights:
    """`/nerve forget me`, `/nerve export` and the forget buttons for one Slack bot."""

    agent: Agent
    poster: Poster
    spawn: Spawn

    async def on_command(self, ack: AsyncAck, command: Mapping[str, Any], typed: list[str]) -> None:
        here = typed_in(command)
        what = typed[0].lower()
        if not here.where().dm:
            shown = "forget me" if what == "forget" else what
            await ack(text=IN_A_DM.format(what=shown), response_type="ephemeral")
            return
        if what == "forget":
            if [word.lower() for word in typed[1:]] != ["me"]:
                await ack(text=FORGET_USAGE, response_type="ephemeral")
                return
            text, blocks = forget_question(here.user_id)
            await ack(text=text, blocks=blocks, response_type="ephemeral")
            return
        await ack(text=EXPORTING, response_type="ephemeral")
        self.spawn(self._export(here))

    async def _export(self, here: Incoming) -> None:
        channel = here.key.channel
        try:
            document = await self.agent.export_person(here.key, here.user_id)
        except Exception:  # told, never a task's silent end
            logger.exception("the export of %s failed", here.user_id)
            await self.poster.tell(channel, here.user_id, rights.EXPORT_FAILED)
            return
        text = rights.export_text(document)
        upload = Upload(filename=rights.EXPORT_NAME, title=rights.EXPORT_TITLE, content=text)
        await self.poster.upload_all(channel, None, [upload])

    async def on_click(self, body: Mapping[str, Any]) -> None:
        """A forget button (already acked); what it did is told to the presser alone."""
        await tell_presser(self.poster, body, RIGHTS_ACTION, self._clicked, rights.FORGET_FAILED)

    async def _clicked(self, here: Incoming, what: str, value: str) -> str:
        if value != here.user_id:
            return rights.NOT_YOURS
        return await self._forget(here) if what == "forget" else rights.NOTHING_DELETED

    async def _forget(self, here: Incoming) -> str:
        try:
            return rights.forgotten_text(await self.agent.forget_person(here.key, here.user_id))
        except Exception:
            logger.exception("forgetting %s failed", here.user_id)
            return rights.FORGET_FAILED
