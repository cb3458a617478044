"""`/nerve memory` and the memory buttons on Slack: the person's list (only they see it), Forget,
Use anywhere, Forget all (confirmed first) and the Undo under a reply that saved a memory.

A renderer only: what may be seen and forgotten is the façade's to decide (`Agent.memories`,
`Agent.forget_memory`, `Agent.undo_memory`). Every button carries its memory's id in its value, so a
press works in whichever process receives it, after a restart too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_bolt.context.ack.async_ack import AsyncAck

from adapters.common import memory_words as words
from adapters.slack.clicks import tell_presser
from adapters.slack.events import typed_in
from adapters.slack.post import Poster
from adapters.slack.render import MEMORY_ACTION, button, confirmed, context, escape, section
from bot.agent import Agent
from bot.types import Incoming, Memory

logger = logging.getLogger(__name__)

MEMORY_ACTIONS = re.compile(rf"^{MEMORY_ACTION}\.")
FAILED = "Sorry — something went wrong on my side with your memories; please try again."


def _button(text: str, what: str, value: str, style: str | None = None) -> dict[str, Any]:
    return button(text, f"{MEMORY_ACTION}.{what}", value, style)


def _confirmed(button: dict[str, Any], question: str) -> dict[str, Any]:
    """A button Slack asks about first (its own dialog): the confirm step of Forget all."""
    return confirmed(button, "Forget all?", question, words.CONFIRM_FORGET_ALL, "Keep them")


# Slack's limit on the blocks of one message.
MAX_BLOCKS = 50


def _item(memory: Memory) -> list[dict[str, Any]]:
    marker = words.where_used(memory)
    line = f"• `{escape(memory.id)}` {escape(memory.text)}" + (f"  _{marker}_" if marker else "")
    buttons = [_button(words.FORGET, "forget", memory.id, "danger")]
    if memory.kind == "person":
        toggle = words.DMS_ONLY_BUTTON if memory.anywhere else words.USE_ANYWHERE
        buttons.append(_button(toggle, "anywhere", f"{memory.id}|{'off' if memory.anywhere else 'on'}"))
    return [section(line), {"type": "actions", "elements": buttons}]


def memory_message(memories: list[Memory]) -> tuple[str, list[dict[str, Any]]]:
    """`/nerve memory`: the person's own memories and the place's, each with its id and buttons."""
    parts = words.sections(memories)
    if not parts:
        return words.NOTHING, []
    blocks: list[dict[str, Any]] = []
    left_out = 0
    for part in parts:
        blocks.append(section(f"*{part.title}*"))
        for memory in part.memories:
            item = _item(memory)
            # Slack refuses a message of more than 50 blocks: three stay for what was left out,
            # Forget all and the hint.
            if len(blocks) + len(item) > MAX_BLOCKS - 3:
                left_out += 1
                continue
            blocks += item
    if left_out:
        blocks.append(context(f"{left_out} more not shown here: forget some, or ask for them by name."))
    mine = sum(1 for m in memories if m.kind == "person")
    if mine:
        forget_all = _button(words.FORGET_ALL, "forget_all", "all", "danger")
        blocks.append(
            {"type": "actions", "elements": [_confirmed(forget_all, words.forget_all_question(mine))]}
        )
    blocks.append(context("Also: `/nerve memory forget ID`, `/nerve memory anywhere ID on|off`."))
    titles = ", ".join(f"{p.title}: {len(p.memories)}" for p in parts)
    return f"What I remember — {titles}", blocks


@dataclass(eq=False)
class SlackMemory:
    """`/nerve memory …` and the memory buttons for one Slack bot."""

    agent: Agent
    poster: Poster

    async def on_command(self, ack: AsyncAck, command: Mapping[str, Any], typed: list[str]) -> None:
        here = typed_in(command)
        if self.agent.memory is None:
            await ack(text=words.MEMORY_OFF, response_type="ephemeral")
            return
        args = [word.lower() for word in typed[1:]]
        try:
            text, blocks = await self._command(here, args, typed[1:])
        except Exception:
            logger.exception("/nerve memory failed for %s", here.user_id)
            text, blocks = FAILED, []
        await ack(text=text, blocks=blocks, response_type="ephemeral")

    async def _command(
        self, here: Incoming, args: list[str], raw: list[str]
    ) -> tuple[str, list[dict[str, Any]]]:
        if not args:
            return memory_message(await self.agent.memories(here))
        if args == ["forget", "all"]:
            mine = sum(1 for m in await self.agent.memories(here) if m.kind == "person")
            if not mine:
                return words.forgot_all(0), []
            question = words.forget_all_question(mine)
            button = _button(words.CONFIRM_FORGET_ALL, "forget_all", "all", "danger")
            return question, [section(escape(question)), {"type": "actions", "elements": [button]}]
        if len(args) == 2 and args[0] == "forget":
            return escape(await self._forget(here, raw[1])), []
        if len(args) == 3 and args[0] == "anywhere" and args[2] in ("on", "off"):
            changed = await self.agent.use_memory_anywhere(here, raw[1], args[2] == "on")
            return words.anywhere_set(args[2] == "on", changed), []
        return words.HOW_TO_USE.replace("`memory", "`/nerve memory"), []

    async def _forget(self, here: Incoming, memory_id: str) -> str:
        forgotten = await self.agent.forget_memory(here, memory_id)
        return words.forgotten(forgotten) if forgotten else words.NO_SUCH.format(id=memory_id)

    async def on_click(self, body: Mapping[str, Any]) -> None:
        """A memory button (already acked); what it did is told to the presser alone."""
        await tell_presser(self.poster, body, MEMORY_ACTION, self._clicked, FAILED)

    async def _clicked(self, here: Incoming, action: str, value: str) -> str:
        what = action.split(".")[0]  # an Undo's id names its index too: "undo.0"
        if what == "undo":
            return words.undone(await self.agent.undo_memory(here, value))
        if what == "forget":
            return words.undone(await self.agent.undo_memory(here, value), undo=False)
        if what == "anywhere":
            memory_id, _, on = value.partition("|")
            changed = await self.agent.use_memory_anywhere(here, memory_id, on == "on")
            return words.anywhere_set(on == "on", changed)
        if what == "forget_all":
            return words.forgot_all(await self.agent.forget_my_memories(here))
        logger.warning("ignored a memory button that is not one of ours: %s", what)
        return FAILED
