"""One driver per surface, so the contract of an ask is written once and checked on all three.

A driver does what a person does through the surface's fake and reads what the person sees:
it starts the surface with an agent that asks before a write (or with the `asks` server, whose
tools ask people questions: forms and links), sends a message as a person, finds the ask that was
shown, answers it as a given person (a click, a form filled in, declined or closed, a link opened),
and reads the answer. Nothing here names the core's events: only what Slack, Discord or the
terminal showed.

People are named by role: "requester" (who asked), "stranger" (anyone else), "admin".
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import aiohttp

from bot.agent import AgentConfig
from bot.asks.parking import ALREADY_DECIDED, EXPIRED, NOT_YOURS
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.store.sqlite import SQLiteStore
from tests.conftest import ROOT
from tests.fakes.clock import Clock
from tests.fakes.discord_api import FakeDiscord, FakeUser, running_bot
from tests.fakes.llm_server import FakeLLMServer, Step
from tests.fakes.slack_api import BOT_USER_ID, Posted
from tests.test_notes_oauth_server import per_person_servers_file
from tests.test_terminal import PROMPT, Terminal, chat_env, nerve, terminal

Person = Literal["requester", "stranger", "admin"]
Choice = Literal["approve", "deny"]
# How a server of the `asks` kind asks: while its call waits (2025-11-25), or in its call's result,
# which parks the turn until the answer (2026-07-28).
Era = Literal["live", "parked"]
ERAS: dict[str, str] = {"live": "2025-11-25", "parked": "2026-07-28"}
# How a question ended, in the words its message (or the terminal's line) says it.
ENDINGS = re.compile(r"(?:✅|🚫|↩️|⌛|⏹)\W*(Answered|Declined|Cancelled|Opened|Done|Expired|Ended)")
SURFACES = ("slack", "discord", "terminal")
EXPIRES_AFTER = 600.0


def ran(notes: Path) -> list[str]:
    """The tools the trust server really ran, in order (it logs each one)."""
    log = notes.with_suffix(".log")
    if not log.exists():
        return []
    return [json.loads(line)["tool"] for line in log.read_text(encoding="utf-8").splitlines()]


class Surface(Protocol):
    """What a test can do and see on a surface, whichever it is."""

    name: str
    notes: Path
    llm: FakeLLMServer
    draws_decisions: bool  # whether the ask stays on screen and shows how it ended

    async def ask(self, text: str) -> Any:
        """Send `text` as the requester and wait for the ask it causes; returns a handle to it."""
        ...

    async def decide(self, ask: Any, choice: Choice, person: Person = "requester") -> str | None:
        """Answer the ask as `person`; returns the note only that person was shown, if any."""
        ...

    async def answer(self, words: str) -> str:
        """Wait for the answer that has `words` in the conversation; returns its text."""
        ...

    def shown(self, ask: Any) -> str:
        """What the ask shows now (after a decision: who decided, or that it expired)."""
        ...

    def who(self, person: Person) -> str:
        """How the surface names `person` where it says who decided."""
        ...

    def answers(self) -> int:
        """How many answers the conversation has so far."""
        ...

    async def outlive(self, ask: Any) -> None:
        """Let the ask's time run out, as the surface measures it."""
        ...

    async def sweep(self) -> None:
        """Let the surface notice asks that ran out of time, as it does on its own."""
        ...

    async def restart(self) -> None:
        """Stop the surface with the ask waiting and start it again on the same database."""
        ...

    async def question(self, text: str) -> Any:
        """Send `text` as the requester and wait for the server's question (a form or a link) it
        causes; returns a handle to it."""
        ...

    async def fill(self, ask: Any, values: dict[str, str]) -> None:
        """Fill the form in as the requester (field title → the value, or the label of the option,
        to give) and send it."""
        ...

    async def decline(self, ask: Any) -> None:
        """Decline the question (a form or a link) as the requester."""
        ...

    async def cancel(self, ask: Any) -> None:
        """Start filling the form in, then close it without sending anything."""
        ...

    async def open_link(self, ask: Any) -> str:
        """Open the question's link as the requester; returns the link they were given."""
        ...

    def ended(self, ask: Any) -> str | None:
        """How the question says it ended ("answered", "declined", "cancelled", "opened", "done",
        "expired"), the newest when it says more than one; None while it is open."""
        ...


def ending_in(shown: str) -> str | None:
    """The newest ending a question's message names, lower case (a message first "Opened", then
    "Done" says the newer last)."""
    found = ENDINGS.findall(shown)
    return found[-1].lower() if found else None


def asks_server(era: Era) -> ServerConfig:
    """The `asks` server on one era, spawned by the host."""
    args = ["-m", "tests.mcp_servers.asks", "--protocol", ERAS[era]]
    return ServerConfig(trustAnnotations=True, command=sys.executable, args=args, cwd=str(ROOT))


def trust_server(notes: Path) -> ServerConfig:
    env = {"TRUST_NOTES": str(notes), "TRUST_LOG": str(notes.with_suffix(".log"))}
    return ServerConfig(
        trustAnnotations=True,
        command=sys.executable,
        args=["-m", "tests.mcp_servers.trust"],
        cwd=str(ROOT),
        env=env,
    )


# --- Slack: the real bolt app over signed HTTP against the mock Web API -------------------------


@dataclass
class SlackSurface:
    name = "slack"
    draws_decisions = True
    notes: Path
    llm: FakeLLMServer
    rig: Any
    clock: Clock
    people: dict[Person, str]
    restarted: Callable[[], Awaitable[Any]]
    root: str = "1600000000.300100"

    async def ask(self, text: str) -> Posted:
        from tests.test_slack_approvals import approval_messages
        from tests.test_slack_harness import mention

        await self.rig.deliver(
            mention(f"<@{BOT_USER_ID}> {text}", ts=self.root, user=self.people["requester"])
        )
        await self.rig.settle()
        [message] = approval_messages(self.rig, self.root)
        return message

    async def decide(self, ask: Posted, choice: Choice, person: Person = "requester") -> str | None:
        from tests.test_slack_approvals import click, ephemerals

        # The button as first drawn: a replayed click sends it again after the ask was redrawn.
        wanted = f"nerve_approval.{choice}.0"
        blocks = ask.versions[0].get("blocks") or []
        [pressed] = [
            e for b in blocks if b.get("type") == "actions" for e in b["elements"] if e["action_id"] == wanted
        ]
        user = self.people[person]
        before = ephemerals(self.rig, user)
        await click(self.rig, ask, pressed, user)
        notes = ephemerals(self.rig, user)[len(before) :]
        assert len(notes) <= 1, notes
        where = {c.body["channel"] for c in self.rig.slack.calls_of("chat.postEphemeral")}
        assert where <= {ask.channel}, "a note to the clicker goes to the ask's channel"
        return notes[0] if notes else None

    async def answer(self, words: str) -> str:
        from tests.test_slack_inputs import is_request

        await self.rig.settle()
        said = [p for p in self.rig.slack.thread(CHANNEL_SLACK, self.root) if not is_request(p)]
        text = str(said[-1].text)
        assert text == words, "the answer is the model's reply, as its last message in the thread"
        assert sum(words in p.text for p in said) == 1, "the answer comes once"
        return text

    def shown(self, ask: Posted) -> str:
        from tests.test_slack_approvals import buttons

        shown = (
            json.dumps(ask.current.get("blocks"), ensure_ascii=False) + f" (drawn {len(ask.versions)} times)"
        )
        return shown if buttons(ask) == [] else f"{shown} (buttons still shown)"

    def _inputs_rig(self) -> Any:
        """The rig as the question helpers drive it (they post form-encoded interactions too)."""
        from tests.test_slack_inputs import Rig

        r = self.rig
        return Rig(slack=r.slack, llm=r.llm, agent=r.agent, bot=r.bot, url=r.url, http=r.http)

    async def question(self, text: str) -> Posted:
        from tests.test_slack_inputs import ask_in_thread

        return await ask_in_thread(self._inputs_rig(), text, self.root)

    async def fill(self, ask: Posted, values: dict[str, str]) -> None:
        from tests.test_slack_inputs import fill_in, inputs, option

        r = self._inputs_rig()
        view = await fill_in(r, ask, self.people["requester"])
        blocks = inputs(view)
        sent: dict[str, Any] = {}
        for title, value in values.items():
            block = blocks[title]
            kind = block["element"]["type"]
            if kind in ("static_select", "radio_buttons"):
                sent[block["block_id"]] = {"value": {"type": kind, "selected_option": option(block, value)}}
            else:
                sent[block["block_id"]] = {"value": {"type": kind, "value": value}}
        submitted = r.slack.view_payload("view_submission", view, self.people["requester"], sent)
        assert await r.interact(submitted) == (200, ""), "a plain ack closes the modal"

    async def decline(self, ask: Posted) -> None:
        from tests.test_slack_inputs import click

        await click(self._inputs_rig(), ask, "decline", self.people["requester"])

    async def cancel(self, ask: Posted) -> None:
        from tests.test_slack_inputs import fill_in

        r = self._inputs_rig()
        view = await fill_in(r, ask, self.people["requester"])
        closed = r.slack.view_payload("view_closed", view, self.people["requester"])
        assert await r.interact(closed) == (200, "")

    async def open_link(self, ask: Posted) -> str:
        """The Open button carries the link (the browser opens it); Slack tells nerve of the click."""
        from tests.test_slack_inputs import buttons, click

        link = str(buttons(ask)["open"]["url"])
        await click(self._inputs_rig(), ask, "open", self.people["requester"])
        return link

    def ended(self, ask: Posted) -> str | None:
        from tests.test_slack_inputs import request_messages

        assert request_messages(self.rig, self.root) == [ask], "the question is one message, updated"
        return ending_in(json.dumps(ask.current.get("blocks"), ensure_ascii=False))

    def who(self, person: Person) -> str:
        return f"<@{self.people[person]}>"

    def answers(self) -> int:
        """The messages in the thread after the ask."""
        thread = self.rig.slack.thread(CHANNEL_SLACK, self.root)
        asked = next(i for i, p in enumerate(thread) if "nerve_approval" in json.dumps(p.versions[0]))
        return len(thread) - asked - 1

    async def outlive(self, ask: Posted) -> None:
        self.clock.now += EXPIRES_AFTER + 1

    async def sweep(self) -> None:
        assert len(await self.rig.bot.sweep()) == 1, "the sweep ends the ask that ran out of time"
        await self.rig.settle()
        assert await self.rig.bot.sweep() == [], "and only once"

    async def restart(self) -> None:
        self.rig = await self.restarted()


CHANNEL_SLACK = "C0CHANNEL"


@contextlib.asynccontextmanager
async def slack_app(
    c: Any,
    host: Any,
    config: AgentConfig,
    clock: Callable[[], float],
    *,
    shared_turns: bool = False,
    **settings: Any,
) -> AsyncIterator[Any]:
    """One run of the bolt app over HTTP on `c`'s fake Slack and database, with its own agent and
    store, as a process that starts on the database the last one left (or, with `shared_turns`,
    a replica beside it: its turns take the store's lock, shared with the other processes)."""
    from adapters.slack.app import build_bot
    from adapters.slack.client import make_client
    from adapters.slack.serve import serve_http
    from bot.agent import Agent
    from bot.model.client import OpenAILLM
    from tests.test_slack_harness import Rig, WatchedInbox, settings_for

    store = await c.backend.open()
    model = OpenAILLM(model="test-model", base_url=c.llm.base_url, api_key=None, timeout=30, max_retries=0)
    agent = Agent(
        llm=model,
        host=host,
        store=store,
        inbox=WatchedInbox(store),
        config=config,
        approvals=store,
        inputs=store,
        clock=clock,
        turn_lock=store.turn_lock if shared_turns else None,
    )
    cfg = settings_for(c.slack, **settings)
    bot = build_bot(agent, cfg, client=make_client(cfg), feedback=store)
    runner = None
    try:
        runner, url = await serve_http(bot, "127.0.0.1", 0)
        async with aiohttp.ClientSession() as http:
            yield Rig(
                slack=c.slack,
                llm=c.llm,
                backend=c.backend,
                store=store,
                agent=agent,
                bot=bot,
                host=c.host,
                url=url,
                http=http,
            )
    finally:
        await bot.aclose()
        if runner is not None:
            await runner.cleanup()
        await model.aclose()
        await store.close()


@contextlib.asynccontextmanager
async def slack_surface(
    tmp_path: Path, notes: Path, host: MCPHost, script: Sequence[Step]
) -> AsyncIterator[SlackSurface]:
    from tests.test_slack_harness import core

    people: dict[Person, str] = {"requester": "U0ALICE", "stranger": "U0BOB", "admin": "U0ADMIN"}
    clock = Clock(1_900_000_000.0)
    config = AgentConfig(admins=frozenset({people["admin"]}))
    async with (
        core(tmp_path, list(script), host=host, approvals=True, clock=clock, config=config) as c,
        contextlib.AsyncExitStack() as running,
    ):
        r = await running.enter_async_context(slack_app(c, host, config, clock))

        async def restart() -> Any:
            await running.aclose()
            return await running.enter_async_context(slack_app(c, host, config, clock))

        yield SlackSurface(notes=notes, llm=c.llm, rig=r, clock=clock, people=people, restarted=restart)


# --- Discord: discord.py's own code against the fake gateway and REST ---------------------------


@dataclass
class DiscordSurface:
    name = "discord"
    draws_decisions = True
    notes: Path
    llm: FakeLLMServer
    fake: FakeDiscord
    clock: Clock
    people: dict[Person, FakeUser]
    restarted: Callable[[], Awaitable[Any]]
    bot: Any  # the client running now
    mention: dict[str, Any] = field(default_factory=dict)
    interactions: list[dict[str, Any]] = field(default_factory=list)

    async def ask(self, text: str) -> dict[str, Any]:
        from tests.test_discord_approvals import approval_in

        self.mention = await self.fake.user_says(self.people["requester"], text, mention_bot=True)
        return copy.deepcopy(await approval_in(self.fake, self.fake.channel_id))

    async def decide(self, ask: dict[str, Any], choice: Choice, person: Person = "requester") -> str | None:
        from tests.test_discord_approvals import click, edits_of, ephemeral_note

        interaction = await click(self.fake, self.people[person], ask, choice.capitalize())
        self.interactions.append(interaction)
        token = re.escape(interaction["token"])
        # The click either edits the ask (it decided) or tells only the clicker why it did not.
        await self.fake.wait_until(
            lambda: bool(
                edits_of(self.fake, interaction) or self.fake.find("POST", rf"/webhooks/\d+/{token}")
            )
        )
        if edits_of(self.fake, interaction):
            return None
        return await ephemeral_note(self.fake, interaction)

    def _answers(self) -> list[str]:
        posts = self.fake.find("POST", rf"/channels/{self.mention['id']}/messages")
        return [str(p.body().get("content") or "") for p in posts]

    def _said(self, words: str) -> list[str]:
        """The bot's messages, wherever the turn answered (a waiting turn where it runs, a parked
        one in the conversation's thread), that begin with `words`."""
        said = [str(m.get("content") or "") for m in self.fake.bot_messages()]
        return [text for text in said if text.startswith(words)]

    async def answer(self, words: str) -> str:
        """The model's reply opens the answer; the tools it used are listed after it. Once all the
        client started has finished, it was posted once."""
        from tests.test_discord_inputs import idle

        await self.fake.wait_until(lambda: bool(self._said(words)), within=20)
        await idle(self.bot)
        [said] = self._said(words)
        return said

    def shown(self, ask: dict[str, Any]) -> str:
        """The ask as Discord holds it now, whichever way it was edited (a click's interaction, or
        the channel message from another process)."""
        from tests.test_discord_approvals import buttons

        now = self.fake.messages[int(ask["id"])]
        drawn = json.dumps(now, ensure_ascii=False, sort_keys=True)
        return f"{drawn} (buttons still shown)" if buttons(now) else drawn

    def who(self, person: Person) -> str:
        return f"<@{self.people[person].id}>"

    def answers(self) -> int:
        return len(self._answers())

    async def outlive(self, ask: dict[str, Any]) -> None:
        self.clock.now += EXPIRES_AFTER + 1

    async def sweep(self) -> None:
        """Discord's sweeper runs on its own timer; a late click already ended the ask."""

    async def restart(self) -> None:
        self.bot = await self.restarted()

    async def question(self, text: str) -> dict[str, Any]:
        from tests.test_discord_inputs import request_in

        self.mention = await self.fake.user_says(self.people["requester"], text, mention_bot=True)
        return copy.deepcopy(await request_in(self.fake, self.fake.channel_id))

    async def fill(self, ask: dict[str, Any], values: dict[str, str]) -> None:
        from tests.test_discord_inputs import answered, fields, open_modal, option

        person = self.people["requester"]
        opened = await open_modal(self.fake, person, ask, "Fill in")
        modal = self.fake.modal_for(opened)
        assert modal is not None
        typed: dict[str, Any] = {}
        for shown in fields(modal):
            value = values[shown["title"]]
            typed[shown["custom_id"]] = (
                [option(modal, shown["title"], value)] if "options" in shown else value
            )
        submitted = await self.fake.submit_modal(person, opened, typed)
        assert (await answered(self.fake, submitted))["type"] == 6, "acknowledged before the turn goes on"

    async def decline(self, ask: dict[str, Any]) -> None:
        from tests.test_discord_inputs import answered, click

        declined = await click(self.fake, self.people["requester"], ask, "Decline")
        assert (await answered(self.fake, declined))["type"] == 6

    async def cancel(self, ask: dict[str, Any]) -> None:
        raise AssertionError("Discord sends nothing when a modal is closed without submitting")

    async def open_link(self, ask: dict[str, Any]) -> str:
        """Open gives only the asker a message with the link as a link button; the browser opens it."""
        from tests.test_discord_inputs import buttons, click, ephemeral_reply

        [label] = [label for label in buttons(ask) if label.startswith("Open ")]
        opened = await click(self.fake, self.people["requester"], ask, label)
        link = await ephemeral_reply(self.fake, opened)
        [button] = buttons(link).values()
        assert button["style"] == 5, "a link button"
        return str(button["url"])

    def ended(self, ask: dict[str, Any]) -> str | None:
        return ending_in(str(self.fake.messages[int(ask["id"])].get("content") or ""))


@contextlib.asynccontextmanager
async def discord_client(
    fake: FakeDiscord, llm: FakeLLMServer, database: Path, host: MCPHost, admin: FakeUser, clock: Clock
) -> AsyncIterator[Any]:
    """One run of the Discord client with its own agent and store on `database`, as a process that
    starts where the last one stopped; yields the inbox that says when a delivery was answered,
    and the client."""
    from tests.test_discord_approvals import approving_agent, bot_settings
    from tests.test_discord_bot import WatchedInbox

    store = await SQLiteStore.open(database)
    inbox = WatchedInbox(store)
    try:
        async with (
            approving_agent(
                llm, store, host, admins=(admin,), clock=clock, inbox=inbox, inputs=store
            ) as agent,
            running_bot(fake, agent, **bot_settings(admin)) as bot,
        ):
            yield inbox, bot
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def discord_surface(
    tmp_path: Path, notes: Path, host: MCPHost, script: Sequence[Step]
) -> AsyncIterator[DiscordSurface]:
    clock = Clock(time.time())
    async with FakeDiscord() as fake, FakeLLMServer(list(script)) as llm:
        people: dict[Person, FakeUser] = {
            "requester": fake.user("ada"),
            "stranger": fake.user("eve"),
            "admin": fake.user("admin"),
        }
        database = tmp_path / "discord.db"
        async with contextlib.AsyncExitStack() as running:
            client = discord_client(fake, llm, database, host, people["admin"], clock)
            inbox, bot = await running.enter_async_context(client)

            async def restart() -> Any:
                async with asyncio.timeout(10):
                    await inbox.finished.wait()  # the message that asked was answered
                await running.aclose()
                assert not fake.connected
                again = discord_client(fake, llm, database, host, people["admin"], clock)
                return (await running.enter_async_context(again))[1]

            yield DiscordSurface(
                notes=notes, llm=llm, fake=fake, clock=clock, people=people, restarted=restart, bot=bot
            )


@contextlib.asynccontextmanager
async def open_surface(
    kind: str,
    tmp_path: Path,
    script: Sequence[Step],
    *,
    expires_after: float = EXPIRES_AFTER,
    asks: Era | None = None,
) -> AsyncIterator[Surface]:
    """The surface `kind` with an agent that asks before the trust server's writes; the note
    starts as one line. With `asks`, its server is the `asks` server of that era instead."""
    notes = tmp_path / "notes.txt"
    notes.write_text("first line\n", encoding="utf-8")
    server = trust_server(notes) if asks is None else asks_server(asks)
    if kind == "terminal":
        timeout = {"NERVE_APPROVAL_TIMEOUT": str(expires_after)}
        async with terminal_surface(tmp_path, notes, script, server, **timeout) as surface:
            yield surface
        return
    async with MCPHost({"notes" if asks is None else "asks": server}, default_timeout=10.0) as host:
        async with asyncio.timeout(20):
            await host.wait_until_ready()
        opened = slack_surface if kind == "slack" else discord_surface
        async with opened(tmp_path, notes, host, script) as chosen:
            yield chosen


# --- the terminal: `nerve chat` as a person runs it, in a pseudo-terminal -----------------------


@dataclass
class TerminalSurface:
    name = "terminal"
    draws_decisions = False  # the question is a prompt line; the typed answer is the record
    notes: Path
    llm: FakeLLMServer
    term: Terminal
    expires_after: float
    at: int = 0
    asked_at: float = 0.0

    async def ask(self, text: str) -> int:
        self.at = await self.term.expect(PROMPT, after=self.at)
        self.term.type(text.encode() + b"\r")
        self.at = await self.term.expect(b"[y]es / [n]o / [a]lways here", after=self.at)
        self.asked_at = time.monotonic()
        return self.at

    async def decide(self, ask: int, choice: Choice, person: Person = "requester") -> str | None:
        assert person == "requester", "a terminal has one person at it"
        typed_at = len(self.term.output)
        self.term.type(b"y\r" if choice == "approve" else b"n\r")
        await self.term.expect(PROMPT, after=typed_at)  # the turn ended
        after = self.term.output[typed_at:].decode(errors="replace")
        notes = [note for note in (EXPIRED, NOT_YOURS, ALREADY_DECIDED.format(by="")) if note in after]
        assert len(notes) <= 1, notes
        return notes[0] if notes else None

    async def answer(self, words: str) -> str:
        self.at = await self.term.expect(words.encode(), after=self.at)
        return words

    def shown(self, ask: int) -> str:
        return self.term.output[ask:].decode(errors="replace")

    def who(self, person: Person) -> str:
        return "you"

    def answers(self) -> int:
        return self.term.output.count(PROMPT)

    async def outlive(self, ask: int) -> None:
        """The terminal's clock is the machine's: wait out the short time it was started with."""
        await asyncio.sleep(max(0.0, self.asked_at + self.expires_after - time.monotonic()) + 0.1)

    async def sweep(self) -> None:
        """The terminal notices an ask ran out of time when it comes to ask it."""

    async def restart(self) -> None:
        raise AssertionError("nerve chat does not take up asks left by a chat that stopped")

    async def question(self, text: str) -> int:
        self.at = await self.term.expect(PROMPT, after=self.at)
        self.term.type(text.encode() + b"\r")
        heads = (b"asks you to fill in a form", b"wants you to open a link")
        await self.term.until(
            lambda out: any(head in out[self.at :] for head in heads), "a question or a link"
        )
        self.at = min(at for head in heads if (at := self.term.output.find(head, self.at)) >= 0)
        # The question is on the screen once it asks for its first field, or for the link.
        await self.term.until(
            lambda out: FIELD_END.search(out, self.at) is not None or OPEN_LINK in out[self.at :],
            "the question's first prompt",
        )
        return self.at

    async def fill(self, ask: int, values: dict[str, str]) -> None:
        """Each field is a line prompt of its own; then Send? (y sends)."""
        at = ask
        for title, value in values.items():
            at = await self.term.expect(f"  {title}".encode(), after=at)
            await self.term.until(lambda out, at=at: FIELD_END.search(out, at) is not None, title)
            self.term.type(value.encode() + b"\r")
        await self.term.expect(SEND_FORM, after=at)
        self.term.type(b"y\r")

    async def decline(self, ask: int) -> None:
        """A link is declined at its prompt; a form at Send?, once its fields are typed in (a form of
        one choice here: its first option is typed)."""
        if self._is_link(ask):
            await self.term.expect(OPEN_LINK, after=ask)
            self.term.type(b"d\r")
            return
        at = await self.term.expect(b"(one of: ", after=ask)
        await self.term.until(lambda out: FIELD_END.search(out, at) is not None, "the field's prompt")
        first = re.split(rb"[,)]", self.term.output[at:])[0].strip()
        self.term.type(first + b"\r")
        await self.term.expect(SEND_FORM, after=at)
        self.term.type(b"d\r")

    async def cancel(self, ask: int) -> None:
        """Ctrl-C at a field cancels the question (and nothing more)."""
        at = await self.term.expect(b"(one of: ", after=ask)
        await self.term.until(lambda out: FIELD_END.search(out, at) is not None, "the field's prompt")
        self.term.type(b"\x03")

    async def open_link(self, ask: int) -> str:
        """The link is printed whole, to open in a browser; Enter says it was done."""
        at = await self.term.expect(b"  Link: ", after=ask)
        end = await self.term.expect(OPEN_LINK, after=at)
        link = self.term.output[at:end].decode(errors="replace").split()[0]
        self.term.type(b"\r")
        return link

    def ended(self, ask: int) -> str | None:
        """The terminal says how the question ended on a line of its own; a link opened is "Sent."."""
        after = self.term.output[ask:]
        found = [(after.rfind(line), ending) for line, ending in TERMINAL_ENDINGS.items() if line in after]
        if not found:
            return None
        ending = max(found)[1]
        return "opened" if ending == "answered" and self._is_link(ask) else ending

    def _is_link(self, ask: int) -> bool:
        return self.term.output.startswith(b"wants you to open a link", ask)


FIELD_END = re.compile(rb"[)\]]:")  # a field's prompt ends: `Title* (hint) [default]: `
SEND_FORM = b"Send? [Y/n/d=decline]"
OPEN_LINK = b"Open it yourself, then press Enter when done, or type d to decline:"
TERMINAL_ENDINGS = {
    b"Sent.": "answered",
    b"Declined.": "declined",
    b"Cancelled: nothing was sent.": "cancelled",
}


@contextlib.asynccontextmanager
async def terminal_surface(
    tmp_path: Path, notes: Path, script: Sequence[Step], server: ServerConfig, **env: str
) -> AsyncIterator[TerminalSurface]:
    """`nerve chat` with `server` in its servers file (the trust server takes its files as
    arguments there: the chat passes a server no environment of its own)."""
    config = tmp_path / "mcp.json"
    args = list(server.args)
    if args[-1] == "tests.mcp_servers.trust":
        args += [str(notes), str(notes.with_suffix(".log"))]
    entry = {"command": server.command, "trustAnnotations": True, "args": args, "cwd": str(ROOT)}
    name = "notes" if "tests.mcp_servers.trust" in args else "asks"
    config.write_text(json.dumps({"mcpServers": {name: entry}}))
    async with FakeLLMServer(list(script)) as llm:
        settings = chat_env(
            tmp_path,
            NERVE_MCP_CONFIG=str(config),
            USER="alice",
            LOGNAME="alice",
            OPENAI_BASE_URL=llm.base_url,
            OPENAI_API_KEY="test",
            **env,
        )
        async with terminal(*nerve("chat"), env=settings) as term:
            expires_after = float(env.get("NERVE_APPROVAL_TIMEOUT", EXPIRES_AFTER))
            yield TerminalSurface(notes=notes, llm=llm, term=term, expires_after=expires_after)
            term.type(b"/quit\r")
            assert await term.exit_code() == 0
        assert "Traceback" not in term.screen()


# --- signing in: the whole runtime (its sign-ins and callback) on each surface -------------------
#
# A per-person server (the notes server, its own authorization server) asks for a sign-in; the turn
# parks; the process stops; another starts on the same database, and the person's browser lands on
# that one's callback, which goes on with the parked turn.

SECRET_KEY = "a-test-secret-key-long-enough"


class SignInSurface(Protocol):
    """What a test can do and see around a sign-in, on whichever surface."""

    name: str

    async def needs_sign_in(self, text: str) -> str:
        """Send `text` as the requester; wait until the turn parked on a sign-in and the link was
        shown to them alone; returns the link."""
        ...

    async def restart(self) -> None:
        """Stop this process and start another on the same database."""
        ...

    async def finish_sign_in(self, link: str) -> str:
        """The requester's browser signs in on the server's page and comes back to the process that
        runs now; returns what nerve's callback page said."""
        ...

    async def answer(self, words: str) -> int:
        """Wait for the answer that says `words`; returns how many messages say them."""
        ...


async def browser_lands(link: str, person: str) -> str:
    """A browser signing in as `person` and following the redirect to nerve's callback."""
    from servers.notes_oauth.sign_in import sign_in_as

    location = await sign_in_as(link, person)
    async with aiohttp.ClientSession() as http, http.get(location) as page:
        assert page.status == 200, await page.text()
        return await page.text()


@dataclass
class SlackSignIn:
    """`nerve slack` in Socket Mode (its runtime and `run_slack`), the callback on its HTTP port."""

    name = "slack"
    slack: Any
    settings: Any
    running: contextlib.AsyncExitStack
    root: str = "1600000000.400100"

    async def start(self) -> None:
        from bot.runtime import open_runtime
        from tests.test_slack_runner import running

        runtime = await self.running.enter_async_context(open_runtime(self.settings))
        assert await self.running.enter_async_context(running(runtime.agent, self.settings)) == "socket-mode"

    async def needs_sign_in(self, text: str) -> str:
        from tests.test_slack_harness import mention
        from tests.test_slack_sign_in import button_url, links_to, said_in

        await self.slack.send_envelope(mention(f"<@{BOT_USER_ID}> {text}", ts=self.root, user="U0ALICE"))
        await self.slack.wait_for(lambda s: bool(links_to(s, "U0ALICE")), 30)
        [link] = links_to(self.slack, "U0ALICE")
        assert link.body["thread_ts"] == self.root, "in the thread, to the requester alone"
        await self.slack.wait_for(lambda s: bool(said_in(s, self.root, "Connect button")), 30)
        return button_url(link)

    async def restart(self) -> None:
        await self.running.aclose()
        await self.start()

    async def finish_sign_in(self, link: str) -> str:
        return await browser_lands(link, "alice")

    async def answer(self, words: str) -> int:
        from tests.test_slack_sign_in import said_in

        # At once in the process that took the callback, not at the next sweep (15 s).
        await self.slack.wait_for(lambda s: bool(said_in(s, self.root, words)), 12)
        return len(said_in(self.slack, self.root, words))


@dataclass
class DiscordSignIn:
    """`nerve discord` (its runtime and `run_discord`), the callback beside its operations port."""

    name = "discord"
    fake: FakeDiscord
    settings: Any
    running: contextlib.AsyncExitStack

    async def start(self) -> None:
        from bot.runtime import open_runtime
        from tests.test_discord_sign_in import running

        runtime = await self.running.enter_async_context(open_runtime(self.settings))
        await self.running.enter_async_context(running(self.fake, self.settings, runtime.agent))

    async def needs_sign_in(self, text: str) -> str:
        """A mention is no interaction: the link comes in a DM, never in the channel."""
        from tests.test_discord_sign_in import dms_to, link_urls

        alice = self.fake.user("alice")
        await self.fake.user_says(alice, text, mention_bot=True)
        await self.fake.wait_until(lambda: bool(dms_to(self.fake, alice.id)), within=30)
        [dm] = dms_to(self.fake, alice.id)
        [link] = link_urls(dm.body())
        await self.fake.wait_until(lambda: bool(self._said("Connect button")), within=30)
        return link

    async def restart(self) -> None:
        await self.running.aclose()
        assert not self.fake.connected
        await self.start()

    async def finish_sign_in(self, link: str) -> str:
        return await browser_lands(link, "alice")

    def _said(self, words: str) -> list[str]:
        return [
            str(m.get("content") or "") for m in self.fake.bot_messages() if words in (m.get("content") or "")
        ]

    async def answer(self, words: str) -> int:
        # At once in the process that took the callback, not at the next sweep (15 s).
        await self.fake.wait_until(lambda: bool(self._said(words)), within=12)
        return len(self._said(words))


@dataclass
class TerminalSignIn:
    """`nerve chat`: the chat serves the callback itself, on a loopback port of its own, while it runs;
    it prints the link and opens it with BROWSER."""

    name = "terminal"
    env: dict[str, str]
    running: contextlib.AsyncExitStack
    term: Terminal | None = None
    at: int = 0

    async def start(self, browser: str) -> None:
        self.term = await self.running.enter_async_context(
            terminal(*nerve("chat"), env={**self.env, "BROWSER": browser})
        )
        self.at = 0

    async def needs_sign_in(self, text: str) -> str:
        assert self.term is not None
        self.at = await self.term.expect(PROMPT)
        self.term.type(text.encode() + b"\r")
        self.at = await self.term.expect(
            b"works with your own account. Sign in in your browser", after=self.at
        )
        start = await self.term.expect(b"http://127.0.0.1:", after=self.at) - len(b"http://127.0.0.1:")
        end = self.term.output.index(b"\n", start)
        return self.term.output[start:end].decode().strip()

    async def restart(self) -> None:
        """The person stops waiting (Ctrl-C) and leaves; the next chat signs in with a browser that
        does (the old link came back to a port now closed)."""
        assert self.term is not None
        self.term.type(b"\x03")
        self.at = await self.term.expect(b"Stopped waiting.", after=self.at)
        self.at = await self.term.expect(PROMPT, after=self.at)
        self.term.type(b"/quit\r")
        assert await self.term.exit_code() == 0
        assert "Traceback" not in self.term.screen()
        await self.running.aclose()
        await self.start(f"{sys.executable} -m tests.sign_in_browser alice %s")

    async def finish_sign_in(self, link: str) -> str:
        """At start the chat asks again with a new link, and the browser opens it and signs in."""
        assert self.term is not None
        self.at = await self.term.expect(b"waits for a sign-in to notes.")
        self.at = await self.term.expect(b"Connected to notes.", after=self.at)
        return "Connected to notes."

    async def answer(self, words: str) -> int:
        assert self.term is not None
        self.at = await self.term.expect(words.encode(), after=self.at)
        await self.term.expect(PROMPT, after=self.at)
        self.term.type(b"/quit\r")
        assert await self.term.exit_code() == 0
        assert "Traceback" not in self.term.screen()
        # What the live view draws while it runs (the cursor hidden) it clears for the answer.
        kept = re.sub(rb"\x1b\[\?25l.*?\x1b\[\?25h", b"", self.term.output, flags=re.DOTALL)
        return kept.count(words.encode())


@contextlib.asynccontextmanager
async def open_sign_in_surface(
    kind: str, tmp_path: Path, mcp_url: str, model: Any
) -> AsyncIterator[SignInSurface]:
    """The surface `kind` running the whole runtime, with the notes server that people sign in to."""
    from tests.ports import unused_port

    config = per_person_servers_file(tmp_path, mcp_url)
    async with FakeLLMServer(model) as llm, contextlib.AsyncExitStack() as running:
        if kind == "terminal":
            env = chat_env(
                tmp_path,
                NERVE_MCP_CONFIG=str(config),
                NERVE_SECRET_KEY=SECRET_KEY,
                OPENAI_BASE_URL=llm.base_url,
                OPENAI_API_KEY="test",
                USER="ada",
                LOGNAME="ada",
            )
            chat = TerminalSignIn(env=env, running=running)
            await chat.start("true %s")  # a browser that opens nothing: the person does not sign in here
            yield chat
            return
        port = unused_port()
        values: dict[str, Any] = {
            "nerve_http_port": port,
            "nerve_db": str(tmp_path / "nerve.db"),
            "nerve_mcp_config": str(config),
            "nerve_public_url": f"http://127.0.0.1:{port}",
            "nerve_secret_key": SECRET_KEY,
            "openai_base_url": llm.base_url,
            "openai_api_key": "test-key",
            "nerve_model": "test-model",
        }
        if kind == "slack":
            from adapters.settings import Settings
            from tests.fakes.slack_api import FakeSlack

            async with FakeSlack() as slack:
                values |= {
                    "slack_bot_token": "xoxb-test-token",
                    "slack_app_token": "xapp-test",
                    "slack_api_base_url": slack.api_url,
                }
                settings = Settings(_env_file=None, **values)  # type: ignore[call-arg]
                surface = SlackSignIn(slack=slack, settings=settings, running=running)
                try:
                    await surface.start()
                    yield surface
                finally:
                    await running.aclose()  # while the fake it talks to is still there
            return
        from tests.fakes.discord_api import settings_for

        async with FakeDiscord() as fake:
            discord = DiscordSignIn(fake=fake, settings=settings_for(fake, **values), running=running)
            try:
                await discord.start()
                yield discord
            finally:
                await running.aclose()
