"""`/nerve`: help, the tools and prompts offered in this place, remembered approvals, reset, and
starting a server's prompt (`/nerve prompt NAME [arg=value …]`), answered like a mention.

Every answer is ephemeral. A slash command has no message to answer in a thread, so a started prompt
is posted (naming who started it) and that post claimed in the inbox as that person's mention: the
same runner answers it, with approvals, follow-ups and answering after a restart.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, replace
from functools import partial
from typing import Any

import aiohttp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackApiError
from slack_sdk.webhook.async_client import AsyncWebhookClient

from adapters.common.commands import SLACK, command_on, offered_on
from adapters.common.tasks import Spawn
from adapters.common.usage_words import usage_lines
from adapters.prompt_arguments import parse_arguments, usage
from adapters.slack.events import (
    DM_THREAD,
    PLATFORM,
    Identity,
    Turn,
    classify,
    inbox_payload,
    typed_in,
    unescape,
)
from adapters.slack.post import Poster, api_error
from adapters.slack.render import OutMessage, escape, escape_capped, safe_markdown
from adapters.slack.settings import SlackSettings
from bot.agent import Agent
from bot.errors import PromptError
from bot.text import truncate
from bot.types import ConversationKey, Incoming, PromptSpec

logger = logging.getLogger(__name__)

# A `/nerve` sub-command's handler: the acknowledgement, the command's payload, its words.
SubCommand = Callable[[AsyncAck, dict[str, Any], list[str]], Awaitable[None]]

HELP = "\n".join(
    [
        "*nerve* answers in threads when you @mention it, and every message in a DM.",
        *(f"• `/nerve {escape(c.written())}` — {c.summary}" for c in offered_on(SLACK)),
        "• In a channel thread, mention me with `reset` to start that thread over.",
    ]
)
RESET_IN_CHANNEL = (
    "In channels every thread is its own conversation, and a new top-level @mention always starts "
    "fresh. To restart inside a thread, mention me there with the word `reset`."
)
# The Agent messaging experience: a DM has no running conversation to reset.
RESET_IN_AGENT_DM = (
    "Here every message you send at the top level starts a new conversation in its own thread. To "
    "restart inside a thread, say `reset` there."
)
ADMINS_ONLY = "Only admins (NERVE_ADMINS) can list or revoke remembered approvals."
APPROVALS_USAGE = "Usage: `/nerve approvals` to list, `/nerve approvals revoke PLACE SERVER TOOL` to revoke."
LISTED = 40
DESCRIBED = 200  # characters of a tool's description in `/nerve tools`


def tools_text(agent: Agent, here: Incoming) -> str:
    """The tools the model is offered where the command was typed; descriptions shown as answers are."""
    tools = agent.tools(here)
    if not tools:
        if agent.tools():
            return "No tools are allowed in this place (the policy in the servers file decides)."
        return "I have no tools right now: my tool servers may be starting or unavailable."
    lines = []
    for tool in tools:
        summary = truncate((tool.description.strip().splitlines() or [""])[0], DESCRIBED, at_word=True)[0]
        lines.append(f"• `{escape(tool.name)}`" + (f" — {safe_markdown(summary)}" if summary else ""))
    return "*Tools I can use here:*\n" + "\n".join(lines)


def prompt_line(spec: PromptSpec) -> str:
    """One prompt as the list shows it: how to write it, what it does, what each argument means."""
    summary = spec.description.strip().splitlines()[0][:200] if spec.description.strip() else ""
    line = f"• `{escape(usage(spec))}`" + (f" — {safe_markdown(summary)}" if summary else "")
    explained = [
        f"{escape(a.name)}{'' if a.required else ' (optional)'}: {safe_markdown(a.description.strip()[:150])}"
        for a in spec.arguments
        if a.description.strip()
    ]
    return line + ("\n    " + " · ".join(explained) if explained else "")


def prompts_text(agent: Agent, here: Incoming) -> str:
    """`/nerve prompts`: the prompts people may start where the command was typed, with their arguments."""
    prompts = agent.prompts(here)
    if not prompts:
        if agent.prompts():
            return "No prompts are offered in this place (the policy in the servers file decides)."
        return "No prompts are offered right now: none of my tool servers has any, or they are starting."
    lines = [prompt_line(spec) for spec in prompts[:LISTED]]
    more = f"\n…and {len(prompts) - LISTED} more." if len(prompts) > LISTED else ""
    return (
        "*Prompts you can start here* — `/nerve prompt NAME arg=value …`, quoting values with spaces "
        '(`topic="the weather"`); a value without a name fills the first required argument:\n'
        + "\n".join(lines)
        + more
    )


async def approvals_text(agent: Agent, admins: frozenset[str], user: str, args: list[str]) -> str:
    """`/nerve approvals [revoke PLACE SERVER TOOL]`: admins list and revoke; others are told so."""
    if user not in admins:
        return ADMINS_ONLY
    if not agent.approvals_on:
        return "Approvals are not enabled."
    if args and (args[0].lower() != "revoke" or len(args) != 4):
        return APPROVALS_USAGE
    if args:
        place, server, tool = args[1:]
        named = f"`{escape(tool)}` of `{escape(server)}`"
        if await agent.revoke_approval(place, server, tool):
            return f"Revoked: {named} asks for approval again in `{escape(place)}`."
        return f"Nothing to revoke: {named} is not always allowed in `{escape(place)}`."
    remembered = await agent.remembered_approvals()
    if not remembered:
        return "No tool is always allowed anywhere: every call that needs approval asks."
    lines = [
        f"• `{escape(r.place)}` · `{escape(r.server)}` / `{escape(r.tool)}` — by {escape(r.granted_by)}"
        f" at {escape(r.granted_at)}\n   revoke: `/nerve approvals revoke {escape(r.place)} "
        f"{escape(r.server)} {escape(r.tool)}`"
        for r in remembered[:LISTED]
    ]
    more = f"\n…and {len(remembered) - LISTED} more." if len(remembered) > LISTED else ""
    return "*Always allowed (remembered approvals):*\n" + "\n".join(lines) + more


# How long the acknowledgement waits for the server's text (Slack wants it within 3 s): a refusal
# that arrives in time goes back in it; a slower server is waited for after it.
ACK_WAIT = 2.0
# How much of the prompt's text the post in the channel shows (the model gets all of it).
SHOWN_CHARS = 2800
PROMPT_FAILED = "Sorry — I could not start that prompt; please try again."
_USER_ID = re.compile(r"[A-Z0-9]+")


def announcement(user: str, name: str, question: str) -> OutMessage:
    """The post a started prompt is answered under: who started which prompt, and its text."""
    who = f"<@{user}>" if _USER_ID.fullmatch(user) else escape(user)
    return OutMessage(
        text=f"{who} started the prompt {escape(name)}: {escape_capped(question, SHOWN_CHARS)}", blocks=[]
    )


def as_mention(team: str, channel: str, user: str, ts: str, question: str, *, dm: bool) -> dict[str, Any]:
    """The post as the Events API body of a mention by `user` (a thread message in a DM), for the inbox."""
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
class NerveCommands:
    """`/nerve WORD …`: the handler the command table names for WORD, or the help. A started prompt
    is handed to `start` as a turn."""

    agent: Agent
    poster: Poster
    settings: SlackSettings
    spawn: Spawn
    _: KW_ONLY
    identity: Callable[[], Awaitable[Identity]]
    start: Callable[[Turn], None]
    connections: SubCommand
    memory: SubCommand
    rights: SubCommand
    schedules: SubCommand
    timezone: SubCommand

    async def on_command(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        words = str(command.get("text") or "").split()
        found = command_on(SLACK, words[0].lower() if words else "help")
        if found is None:
            unknown = f"`{escape(words[0][:50])}` is not a `/nerve` command. Here is what is:\n{HELP}"
            await ack(text=unknown, response_type="ephemeral")
        else:
            await self.handlers()[found.name](ack, command, words)

    def handlers(self) -> dict[str, SubCommand]:
        """What each `/nerve` sub-command of the command table runs (a test holds the two together)."""
        return {
            "tools": self._tools,
            **dict.fromkeys(("prompts", "prompt"), self._prompt),
            "approvals": self._approvals,
            **dict.fromkeys(("connections", "connect", "disconnect"), self.connections),
            "memory": self.memory,
            **dict.fromkeys(("forget", "export"), self.rights),
            "schedules": self.schedules,
            "usage": self._usage,
            "timezone": self.timezone,
            "reset": self._reset,
            "help": lambda ack, command, words: ack(text=HELP, response_type="ephemeral"),
        }

    async def _tools(self, ack: AsyncAck, command: dict[str, Any], words: list[str]) -> None:
        await ack(text=tools_text(self.agent, typed_in(command)), response_type="ephemeral")

    async def _usage(self, ack: AsyncAck, command: dict[str, Any], words: list[str]) -> None:
        lines = usage_lines(await self.agent.usage(typed_in(command)))
        await ack(text="\n".join(escape(line) for line in lines), response_type="ephemeral")

    async def _approvals(self, ack: AsyncAck, command: dict[str, Any], words: list[str]) -> None:
        text = await approvals_text(self.agent, self.settings.admins, typed_in(command).user_id, words[1:])
        await ack(text=text, response_type="ephemeral")

    async def _reset(self, ack: AsyncAck, command: dict[str, Any], words: list[str]) -> None:
        here = typed_in(command)
        if not here.where().dm:
            await ack(text=RESET_IN_CHANNEL, response_type="ephemeral")
            return
        if self.settings.slack_experience == "agent":
            await ack(text=RESET_IN_AGENT_DM, response_type="ephemeral")
            return
        await ack()
        self.spawn(self._reset_dm(replace(here.key, thread=DM_THREAD), here.user_id))

    async def _reset_dm(self, key: ConversationKey, user: str) -> None:
        try:
            await self.agent.reset(key)
            text = "Started a new conversation: I have forgotten what we said before in this DM."
        except Exception:
            logger.exception("reset of %s failed", key)
            text = "Sorry — I could not reset our conversation; please try again."
        await self.poster.tell(key.channel, user, text)

    async def _prompt(self, ack: AsyncAck, command: Mapping[str, Any], words: list[str]) -> None:
        """`/nerve prompt …` or `/nerve prompts`, acknowledged within Slack's 3 seconds."""
        sub, name, written = [*unescape(str(command.get("text") or "")).split(None, 2), "", "", ""][:3]
        here = typed_in(command)
        if sub.lower() == "prompts" or not name:
            await ack(text=prompts_text(self.agent, here), response_type="ephemeral")
            return
        spec = next((p for p in self.agent.prompts(here) if p.name == name), None)
        hint = f"\nWrite it as `/nerve prompt {escape(usage(spec))}`." if spec is not None else ""
        try:
            # An unknown name is left to the core, which names the prompts there are.
            arguments = parse_arguments(spec, written) if spec is not None else {}
        except PromptError as exc:
            await ack(text=_refusal(name, exc, hint), response_type="ephemeral")
            return
        question = asyncio.ensure_future(self.agent.prompt_question(here, name, arguments))
        try:
            done, _ = await asyncio.wait({question}, timeout=ACK_WAIT)
        except asyncio.CancelledError:
            question.cancel()
            raise
        refused = question.exception() if done else None
        if refused is not None:
            await ack(text=_refusal(name, refused, hint), response_type="ephemeral")
            return
        await ack()
        tell = partial(tell_privately, self.poster, here, str(command.get("response_url") or ""))
        self.spawn(self._begin(question, here, name, hint, tell))

    async def _begin(
        self,
        question: asyncio.Future[str],
        here: Incoming,
        name: str,
        hint: str,
        tell: Callable[[str], Awaitable[None]],
    ) -> None:
        channel, user = here.key.channel, here.user_id
        try:
            text = await question
        except Exception as exc:
            await tell(_refusal(name, exc, hint))
            return
        try:
            ts = await self.poster.post(channel, None, announcement(user, name, text))
        except SlackApiError as exc:
            logger.warning("could not post the prompt %s in %s: %s", name, channel, api_error(exc))
            await tell(f"I cannot post in this channel ({api_error(exc)}): invite me first.")
            return
        body = as_mention(here.key.workspace, channel, user, ts, text, dm=here.where().dm)
        me = await self.identity()
        turn = classify(body, me, allow_bots=True, follow_threads=True, followed=lambda _key: True)
        if turn is None:
            logger.error("the post of the prompt %s in %s is not a turn", name, channel)
            return
        if await self.agent.inbox.claim_event(PLATFORM, turn.event_id, inbox_payload(body)):
            self.start(turn)


def _refusal(name: str, exc: BaseException, hint: str) -> str:
    if isinstance(exc, PromptError):
        return escape(str(exc)) + hint
    logger.error("starting the prompt %s failed", name, exc_info=exc)
    return PROMPT_FAILED


async def tell_privately(poster: Poster, here: Incoming, response_url: str, text: str) -> None:
    """Tell only the person who typed the command: an ephemeral message, or where the bot may not post,
    the command's response URL (Slack accepts it for 30 minutes wherever the command was typed)."""
    channel, user = here.where().channel or "", here.user_id
    try:
        await poster.client.chat_postEphemeral(channel=channel, user=user, text=text)
        return
    except SlackApiError as exc:
        logger.info("no ephemeral message in %s (%s); using the response URL", channel, api_error(exc))
    if not response_url:
        return
    try:
        sent = await AsyncWebhookClient(response_url, timeout=10).send(text=text, response_type="ephemeral")
    except (aiohttp.ClientError, TimeoutError, OSError) as exc:
        logger.warning("could not tell %s about the prompt: %s", user, exc)
        return
    if sent.status_code != 200:
        logger.warning("could not tell %s about the prompt: HTTP %s", user, sent.status_code)
