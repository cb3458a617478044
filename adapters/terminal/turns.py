"""The turns of the terminal chat: each shown as it runs, and what it waits for (decisions,
sign-ins, questions) asked here before going on; a turn parked when nerve stopped is taken up at start."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import Any

from rich.console import Console

from adapters.terminal.approve import ask_each, go_on, go_on_answered
from adapters.terminal.fill_in import FillIn, Parked
from adapters.terminal.keyboard import Interrupted, ReadLine, interruptible, on_ctrl_c
from adapters.terminal.live import LiveAnswer, PlainAnswer
from adapters.terminal.safe import shown
from adapters.terminal.sign_in import TerminalSignIn
from adapters.terminal.views import print_reply
from bot.runtime import Runtime
from bot.types import AgentReply, ApprovalPrompt, Ask, ConversationKey, Incoming, Progress, TurnEvent

logger = logging.getLogger(__name__)


# One piece of a turn: its reply and, when it parked, how its questions went (asked here).
_Piece = tuple[AgentReply, Parked | None]


@dataclass(eq=False)
class ChatTurns:
    """The turns of one chat; `servers_news` is told once the MCP servers a turn waited for started."""

    runtime: Runtime
    console: Console
    key: ConversationKey
    read: ReadLine
    sign_in: TerminalSignIn
    servers_news: Callable[[], None]

    def __post_init__(self) -> None:
        # The OS user: the one who asks in this terminal, and so the one who approves.
        self._user = self.key.workspace
        self.last: AgentReply | None = None
        # Off a terminal (a pipe, a file) the answer is written as plain text as it comes.
        self._plain = PlainAnswer(self.console.file)

    async def take(self, incoming: Incoming) -> None:
        """Answer one message, going on with what it waits for until it has its answer."""
        for request_id in self.sign_in.meanwhile():  # signed in while the chat did not wait: go on first
            await self._answer(await self._go_on_signed_in([request_id]))
        self.last = None
        await self._answer(await self._work(partial(self.runtime.agent.reply, incoming)))

    async def answered(self, reply: AgentReply) -> None:
        """A reply that came from elsewhere (a scheduled run), gone on with here as the chat's own."""
        await self._answer((reply, None))

    async def signed_in(self, request_ids: list[str]) -> None:
        """The turns a sign-in made by a chat command lets go on, answered."""
        await self._answer(await self._go_on_signed_in(request_ids))

    async def _work(
        self, work: Callable[[Progress], Coroutine[Any, Any, AgentReply | None]], *, cancellable: bool = True
    ) -> _Piece | None:
        """One piece of a turn, shown live; None when cancelled or failed (said so). What a server asks
        meanwhile is asked at once; a turn parked on questions has them asked before this returns."""
        if not self.runtime.servers_started:
            self.console.print("[dim]Waiting for the MCP servers to start…[/dim]")

        async def after_the_servers(progress: Progress) -> AgentReply | None:
            # A question typed while they start is answered as if asked once they had.
            await self.runtime.wait_for_servers()
            self.servers_news()
            return await work(progress)

        async with (
            self._showing("  (Ctrl-C cancels)" if cancellable else "") as (sink, pause),
            FillIn(self.runtime.agent, self._user, self.read, self.console, pause) as fill_in,
        ):
            task = asyncio.create_task(after_the_servers(fill_in.watching(self.sign_in.watch(sink))))
            try:
                # Under the piece's own Ctrl-C, so a question asked while the piece ran (which takes
                # Ctrl-C for itself, in a task of its own) keeps it once the piece has returned;
                # between questions Ctrl-C does nothing.
                with on_ctrl_c(lambda: None):
                    if cancellable:
                        reply = await interruptible(task)
                    else:
                        with on_ctrl_c(self._finishing):
                            reply = await task
                    if reply is None:
                        return None
                    return reply, await fill_in.settle()
            except Interrupted:
                message = "[dim]Cancelled. Your message is kept; ask again to retry.[/dim]"
            except Exception as exc:  # the one net per message: say something short and true
                logger.exception("terminal turn failed")
                message = f"[red]Sorry — that failed: {shown(str(exc))}[/red]"
        self._plain.interrupted()
        self.console.print(message)
        return None

    @contextlib.asynccontextmanager
    async def _showing(
        self, hint: str
    ) -> AsyncIterator[tuple[Progress, Callable[[], AbstractContextManager[None]]]]:
        """Where a turn's events go (live view or plain text), and how to pause the view for a question."""
        if not self.console.is_terminal:
            self._plain.after_prompt()
            yield self._plain.progress, contextlib.nullcontext
            return
        async with LiveAnswer(self.console, hint=hint) as live:
            yield live.progress, live.paused

    def _finishing(self) -> None:
        # Going on after a decision or an answer is not cancelled: the turn would stay claimed, and
        # the thread would wait behind it.
        self.console.print("[dim]Finishing what was decided; the answer follows.[/dim]")

    async def _answer(self, piece: _Piece | None) -> None:
        """Print a reply; while it waits (a decision, questions, a sign-in), go on and print what follows."""
        went_on = False
        while piece is not None:
            reply, parked = piece
            approval = reply.approval
            self.last = reply
            if parked is not None:
                self._plain.interrupted()
            elif self.sign_in.needed and approval is None:
                pass  # its note speaks of a Connect button; here the link itself follows
            elif reply.text or reply.attachments:
                # Drawn anew on a terminal, elsewhere only what is not written.
                if not self.console.is_terminal:
                    self._plain.finish(reply.text)
                print_reply(self.console, reply, text=self.console.is_terminal)
            if approval is not None:
                piece = await self._decide(approval)
            elif parked is not None:
                piece = await self._go_on_answered(parked)
            elif self.sign_in.needed:
                piece = await self._go_on_signed_in(await self.sign_in.signed_in())
            else:
                break
            went_on = True
        if not went_on:
            return
        async for incoming, reply in self.runtime.agent.deferred_replies(self.key):
            self.console.print(f"[dim]Your message that waited:[/dim] {shown(incoming.text[:100])}")
            await self._answer((reply, None))

    async def _rest(
        self, rest: Callable[[Progress], Awaitable[AgentReply | None]], waits: str
    ) -> _Piece | None:
        """The rest of a turn once what it waited for is settled (not cancellable: it was decided)."""

        async def rest_of_turn(progress: Progress) -> AgentReply | None:
            final = await rest(progress)
            if final is None:
                self.console.print(f"[dim]This turn still waits for {waits}, or goes on elsewhere.[/dim]")
            return final

        return await self._work(rest_of_turn, cancellable=False)

    async def _go_on_answered(self, parked: Parked) -> _Piece | None:
        what = f"an answer to what {shown(', '.join(parked.tools) or 'a tool')} asked"
        return await self._rest(partial(go_on_answered, self.runtime.agent, parked), what)

    async def _go_on_signed_in(self, request_ids: list[str]) -> _Piece | None:
        """The rest of the turns that waited for a sign-in here, once the browser came back."""
        piece = None
        for request_id in request_ids:
            piece = await self._work(partial(self.runtime.agent.resume, request_id), cancellable=False)
        return piece

    async def _decide(self, prompt: ApprovalPrompt) -> _Piece | None:
        if prompt.open:
            await ask_each(self.runtime.agent, prompt, self._user, self.read, self.console)
        return await self._rest(partial(go_on, self.runtime.agent, prompt), "a decision")

    async def waiting_at_start(self) -> None:
        """A turn of this thread still waiting for a person when nerve stopped: ask again."""
        found = await self.runtime.agent.parked_in(self.key)
        if found is None:
            return
        prompt, status = found
        if status != "waiting":
            self.console.print(
                "[yellow]Another nerve is finishing the last answer of this thread;[/yellow] "
                "new messages wait behind it."
            )
            return
        waits = await self.runtime.store.sign_in_waits(prompt.request_id) if prompt.questions_open else []
        if waits:
            servers = list(dict.fromkeys(w.server for w in waits))
            names = shown(", ".join(servers))
            waiting = f"Your last question in this thread waits for a sign-in to {names}."
            self.console.print(f"[yellow]{waiting}[/yellow]")
            await self._answer(await self._go_on_signed_in(await self.sign_in.connect(servers)))
            return
        if prompt.questions_open and await self._ask_again(prompt):
            return
        if not any(call.status == "pending" for call in prompt.calls) and prompt.questions_open:
            # Questions this terminal cannot answer (none of them is its user's): the turn goes on
            # once they have expired (the tool is told "cancel"), or /reset ends it.
            until = time.strftime("%H:%M", time.localtime(prompt.expires_at))
            self.console.print(
                "[yellow]Your last question in this thread waits for an answer to what a tool asked "
                f"before nerve stopped,[/yellow] until {until}: start the chat again after that for "
                "the answer without it, or /reset to start a new conversation."
            )
            await self._answer(await self._go_on_answered(Parked(key=self.key, tools=(), resume=None)))
            return
        self.console.print("[yellow]Your last question in this thread is waiting for your decision.[/yellow]")
        await self._answer((AgentReply(text="", waiting=(Ask.of_approval(prompt),)), None))

    async def _ask_again(self, prompt: ApprovalPrompt) -> bool:
        """What a tool asked before nerve stopped, asked again (expired ones are not: the turn goes on
        without them); False when none of them is this person's to answer now."""
        questions = await self.runtime.agent.parked_questions(prompt.request_id)
        if any(q.expires_at <= time.time() for q in questions):
            self.console.print(
                "[dim]What a tool asked before nerve stopped was not answered in time; "
                "the turn goes on without it.[/dim]"
            )
            await self._answer(await self._go_on_answered(Parked(key=self.key, tools=(), resume=None)))
            return True
        mine = [q for q in questions if q.user_id == self._user]
        if not mine:
            return False
        self.console.print(
            "[yellow]Your last question in this thread waits for an answer to what a tool asked "
            "before nerve stopped:[/yellow]"
        )
        waits = (Ask.of_approval(prompt),) if any(call.status == "pending" for call in prompt.calls) else ()

        async def asked_again(progress: Progress) -> AgentReply:
            for question in mine:
                await progress(TurnEvent(kind="ask", message=question.message, ask=Ask.of_input(question)))
            return AgentReply(text="", waiting=waits)

        await self._answer(await self._work(asked_again, cancellable=False))
        return True
