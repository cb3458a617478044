"""Approvals in the terminal: the person (the OS user, who asked) is asked per call; `nerve ask` in
a script decides every call at once, denied or approved with `--yes`."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import TYPE_CHECKING

from rich.console import Console

from adapters.common import cards
from adapters.terminal.fill_in import FillIn, Parked
from adapters.terminal.keyboard import ReadLine
from adapters.terminal.safe import printable, say, shown
from bot.errors import AskError
from bot.types import AgentReply, Answer, ApprovalPrompt, Approve, Deny, PendingCall, Progress

QUESTION = "Run {call}? [y]es / [n]o / [a]lways here "
REMEMBER = "Remember it? [y]es / [n]o "
CONFIRM = "Confirm it? [y]es / [n]o "
HOW_TO_REMEMBER = "Answer y (remember it) or n (do not)."
HOW_TO_CONFIRM = "Answer y (confirm it) or n (do not)."
HOW_TO_ANSWER = "Answer y (run it), n (do not run it) or a (run it, and always allow this tool here)."
# (approve, remember) for each answer a person may type.
ANSWERS = (
    dict.fromkeys(("y", "yes"), (True, False))
    | dict.fromkeys(("n", "no"), (False, False))
    | dict.fromkeys(("a", "always"), (True, True))
)
PREVIEW_VALUE_CHARS = 40
# What `--yes` does not decide, and what stderr says instead when nobody is there to ask.
_NOT_BY_YES = {
    cards.MEMORY_SERVER: "not remembered: a tool's text led to it; say it in your own words",
    cards.SCHEDULES_SERVER: "not scheduled: a schedule needs your own confirmation; ask on a terminal",
}

if TYPE_CHECKING:  # the façade loads the MCP client: `nerve history` and the like need none
    from bot.agent import Agent


async def _decide(
    agent: Agent, prompt: ApprovalPrompt, user: str, answer: Answer, console: Console | None = None
) -> None:
    """One decision through `Agent.answer`; why nothing changed, on `console`."""
    try:
        answered = await agent.answer(prompt.request_id, user, answer)
        note = answered.note if not answered.changed and answered.note else None
    except AskError as exc:
        note = exc.message
    if console is not None and note is not None:
        console.print(f"[yellow]{shown(note)}[/yellow]")


def call_preview(call: PendingCall) -> str:
    """The call on one line: the tool, its first argument (cut short), `…` for the rest."""
    if not call.arguments:
        return f"{call.tool}()"
    name, value = next(iter(call.arguments.items()))
    text = json.dumps(value, ensure_ascii=False)
    if len(text) > PREVIEW_VALUE_CHARS:
        text = text[: PREVIEW_VALUE_CHARS - 1] + "…"
    more = ", …" if len(call.arguments) > 1 else ""
    return printable(f"{call.tool}({name}={text}{more})")


async def ask_each(agent: Agent, prompt: ApprovalPrompt, user: str, ask: ReadLine, console: Console) -> None:
    """Ask about every open call in turn; Ctrl-C or end of input denies those not yet decided."""
    pending = [c for c in prompt.calls if c.status == "pending"]
    until = time.strftime("%H:%M", time.localtime(prompt.expires_at))
    count = "1 call waits" if len(pending) == 1 else f"{len(pending)} calls wait"
    console.print(f"[bold yellow]Approval needed:[/bold yellow] {count} for you (until {until}).")
    if prompt.reason:
        console.print(f"[dim]The model says:[/dim] {shown(prompt.reason)}")
    for position, call in enumerate(pending):
        if prompt.expires_at <= time.time():
            console.print("[yellow]This request has expired: the calls were not approved in time.[/yellow]")
            return
        question = cards.remember_question(call)
        if question is not None:  # a memory to keep or a schedule to confirm, asked as what it is
            console.print(f"{question.icon} [bold]{shown(question.headline)}[/bold]")
            console.print(printable(question.text), markup=False, highlight=False)
        else:
            # The call exactly as it will run: its server, its tool and every argument in full.
            console.print(f"[bold]{shown(call.tool)}[/bold] [dim]on server[/dim] {shown(call.server)}")
            console.print(printable(call.arguments_json()), markup=False, highlight=False)
        choice = await _answer(ask, call, console)
        if choice is None:
            rest = pending[position:]
            for c in rest:
                await _decide(agent, prompt, user, Deny(call_id=c.call_id, shown_hash=c.call_hash))
            names = ", ".join(dict.fromkeys(c.tool for c in rest))
            console.print(f"[yellow]Not run: {shown(names)}[/yellow] (denied: the question was interrupted).")
            return
        approve, remember = choice
        answer: Answer = Deny(call_id=call.call_id, shown_hash=call.call_hash)
        if approve:
            answer = Approve(call_id=call.call_id, shown_hash=call.call_hash, remember=remember)
        await _decide(agent, prompt, user, answer, console)


async def _answer(ask: ReadLine, call: PendingCall, console: Console) -> tuple[bool, bool] | None:
    # A memory or a schedule is asked about each time: "always" is no answer to it.
    asked_each_time = cards.remember_question(call) is not None
    question, how = QUESTION.format(call=call_preview(call)), HOW_TO_ANSWER
    if asked_each_time:
        memory = call.server == cards.MEMORY_SERVER
        question, how = (REMEMBER, HOW_TO_REMEMBER) if memory else (CONFIRM, HOW_TO_CONFIRM)
    while (answer := await ask(question)) is not None:
        choice = ANSWERS.get(answer.strip().lower())
        if choice is not None and not (asked_each_time and choice[1]):
            return choice
        console.print(how, markup=False)
    return None


async def go_on(agent: Agent, prompt: ApprovalPrompt, progress: Progress) -> AgentReply | None:
    """The rest of the turn once every call is decided or expired; None while one waits or elsewhere."""
    final = await agent.resume(prompt.request_id, progress)
    if final is None and prompt.expires_at <= time.time():
        await agent.expire_due("terminal")
        final = await agent.resume(prompt.request_id, progress)
    return final


async def go_on_answered(agent: Agent, parked: Parked, progress: Progress) -> AgentReply | None:
    """The rest of a turn parked on questions (its conversation's if none resumed here); None: it waits."""
    request_id = parked.resume
    if request_id is None:
        found = await agent.parked_in(parked.key)
        if found is None:
            return None
        request_id = found[0].request_id
    final = await agent.resume(request_id, progress)
    if final is None and request_id in await agent.expire_due("terminal"):
        final = await agent.resume(request_id, progress)
    return final


async def settle_one_shot(
    questions: FillIn, reply: AgentReply, progress: Progress, *, approve_all: bool
) -> AgentReply:
    """`nerve ask`: decide and answer until the answer no longer waits: calls approved with `--yes`,
    asked on a terminal, else denied by nerve (stderr says which); `questions` asks the rest."""
    agent, user, ask, console = questions.agent, questions.user, questions.read, questions.console
    while True:
        parked = await questions.settle()
        prompt = reply.approval
        if prompt is not None:
            if approve_all:
                # `--yes` approves tool calls, not what is remembered about the person or runs later
                # as them: a memory write a tool's text led to, or a schedule, is asked on a
                # terminal, else denied below.
                for call in prompt.calls:
                    if call.status == "pending" and not cards.requesters_own(call):
                        await _decide(agent, prompt, user, Approve(call_id=call.call_id))
                own = tuple(c for c in prompt.calls if cards.requesters_own(c))
                if own and ask is not None:
                    await ask_each(agent, dataclasses.replace(prompt, calls=own), user, ask, console)
                elif own:
                    await agent.deny_unasked(prompt.request_id)
                    for call in own:
                        say(f"nerve: {_NOT_BY_YES.get(call.server, 'not run')}", sys.stderr)
            elif ask is not None:
                await ask_each(agent, prompt, user, ask, console)
            else:  # nobody to ask: nerve denies, and says so, rather than deciding as the person
                denied = await agent.deny_unasked(prompt.request_id)
                for call in (c for c in prompt.calls if c.call_id in denied):
                    say(f"nerve: not run: {call.tool} needs approval; run with --yes to approve", sys.stderr)
            final = await go_on(agent, prompt, progress)
            waits_for = "a decision on its tool calls"
        elif parked is not None:
            final = await go_on_answered(agent, parked, progress)
            waits_for = "answers to what its tools asked"
        else:
            return reply
        if final is None:
            text = f"This answer still waits for {waits_for}; nothing more was run."
            return AgentReply(text=text, attachments=reply.attachments, failed=True)
        reply = final
