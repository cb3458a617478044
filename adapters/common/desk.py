"""The approval desk: a click decided through the agent, the message redrawn, the turn going on.

Nothing here waits for a person. A click that changes nothing is told only to the clicker; once
every call is decided, the parked turn goes on through `go_on` however it was released."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from functools import partial
from typing import Literal, Protocol

from adapters.common.tasks import Spawn
from adapters.jobs_runtime import Launcher
from bot.agent import APPROVAL_GONE as GONE
from bot.agent import Agent
from bot.errors import AskError, AskExpired
from bot.types import Answer, ApprovalPrompt, Approve, ConversationKey, Decision, Deny, PendingCall

logger = logging.getLogger(__name__)

Choice = Literal["approve", "deny", "approve_all", "deny_all", "always"]
CHOICES: tuple[Choice, ...] = ("approve", "deny", "approve_all", "deny_all", "always")
_APPROVING = frozenset({"approve", "approve_all", "always"})
_ONE_CALL = frozenset({"approve", "deny"})
# A button names a call by its id or, when the id does not fit, by its position after this mark.
AT = "~"
# The characters of a hash a button carries when it cannot carry all of it.
HASH_CHARS = 12
CLICK_FAILED = "Sorry — something went wrong on my side with that click; please try again."


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalClick:
    """An approval button pressed: `call` names a single call (its id, or `~<position>`),
    `shown_hash` is (the start of) the hash of what the button was drawn for."""

    choice: Choice
    request_id: str
    call: str | None = None
    shown_hash: str | None = None


def find_call(prompt: ApprovalPrompt, ref: str) -> PendingCall | None:
    """The call a button names: by its id, or by its position (`~<position>`)."""
    if ref.startswith(AT) and ref[1:].isdigit():
        index = int(ref[1:])
        return prompt.calls[index] if index < len(prompt.calls) else None
    return next((c for c in prompt.calls if c.call_id == ref), None)


def batch_hash(prompt: ApprovalPrompt) -> str:
    """One short hash for the whole batch, for the buttons that decide every call at once."""
    joined = "\n".join(c.call_hash for c in prompt.calls)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:HASH_CHARS]


class Surface(Protocol):
    """A platform's side of the desk: redraw an approval message from its stored reference."""

    async def edit(self, ref: str, prompt: ApprovalPrompt) -> None: ...


class Clicker(Protocol):
    """The person who clicked: `tell` a note only they see; `show` the decision through the click."""

    async def tell(self, text: str) -> None: ...

    async def show(self, prompt: ApprovalPrompt) -> bool: ...


class ParkedTurns(Protocol):
    """How a parked turn goes on in its conversation: `resume` answers once, then the messages that
    waited; `answer_deferred` answers those of a conversation whose turn is no longer parked."""

    async def resume(self, request_id: str) -> None: ...

    async def answer_deferred(self, key: ConversationKey) -> None: ...


@dataclass(eq=False)
class AskDesk:
    """Turns clicks and expiries into decisions, redrawn messages and turns that go on."""

    agent: Agent
    platform: str
    surface: Surface
    turns: ParkedTurns
    launch: Launcher
    spawn: Spawn
    _: KW_ONLY
    # What a click on an expired request sets off (the sweep, to show it at once), if anything.
    on_expired: Callable[[], None] | None = None

    async def clicked(self, click: ApprovalClick, user: str, clicker: Clicker) -> None:
        """One click (already acked): decide, then show it and go on, or tell the clicker why not."""
        try:
            decision = await self._decide(click, user)
        except AskError as exc:  # gone or expired: only the clicker is told
            await clicker.tell(exc.message)
            if isinstance(exc, AskExpired) and self.on_expired is not None:
                self.on_expired()
            return
        except Exception:
            logger.exception("deciding approval request %s failed", click.request_id)
            await clicker.tell(CLICK_FAILED)
            return
        prompt = decision.prompt
        if not decision.changed or prompt is None:
            await clicker.tell(decision.note or GONE)
            return
        shown = await clicker.show(prompt)
        if decision.ready:
            # In the background: the click is answered and must not wait for the turn.
            self.spawn(self.go_on(prompt.request_id, redraw=not shown), f"resume-{prompt.request_id}")
        elif not shown:
            await self.redraw(prompt)

    async def _decide(self, click: ApprovalClick, user: str) -> Decision:
        """Decide, bound to exactly the calls the button was drawn for (`AskError` when gone)."""
        found = await self._prompt(click.request_id)
        one = click.choice in _ONE_CALL
        call = find_call(found, click.call) if one and found is not None and click.call else None
        if one and found is not None and call is None:
            return Decision(changed=False, prompt=found, note=GONE)
        shown = click.shown_hash
        if shown and found is not None:
            drawn_for = call.call_hash if call is not None else batch_hash(found)
            if drawn_for.startswith(shown):
                # The button was drawn for exactly these calls: bind the decision to their full hash.
                shown = call.call_hash if call is not None else None
        call_id = call.call_id if call is not None else None
        answer: Answer = Deny(call_id=call_id, shown_hash=shown)
        if click.choice in _APPROVING:
            answer = Approve(call_id=call_id, shown_hash=shown, remember=click.choice == "always")
        answered = await self.agent.answer(click.request_id, user, answer)
        assert answered.decision is not None, "an approval's answer carries its decision"
        return answered.decision

    async def redraw(self, prompt: ApprovalPrompt) -> None:
        """Redraw the approval message from the request as it stands (any process can)."""
        if prompt.message_ref:
            await self.surface.edit(prompt.message_ref, prompt)

    async def go_on(self, request_id: str, *, redraw: bool = True) -> None:
        """A parked turn with nothing left to wait for goes on: a job when jobs are shared, else here."""
        key: ConversationKey | None = None
        if self.launch.jobs is not None:
            found = await self._prompt(request_id)
            key = found.key if found is not None else None
        await self.launch.resume(request_id, key, lambda: self.go_on_here(request_id, redraw=redraw))

    async def go_on_here(self, request_id: str, *, redraw: bool = True) -> None:
        """A parked turn goes on here: its message redrawn, then its answer and the messages that waited."""
        if redraw:
            found = await self._prompt(request_id)
            if found is not None:
                await self.redraw(found)
        await self.turns.resume(request_id)

    async def sweep(self) -> list[str]:
        """Expired requests are shown expired; their turns go on without the calls or answers nobody gave."""
        expired = await self.agent.expire_due(self.platform)
        for request_id in expired:
            await self.go_on(request_id)
        return expired

    async def recover(self) -> int:
        """At start-up: requests decided (or expired) before a stop go on, and the messages that
        waited in conversations whose turn is no longer parked are answered; returns how many."""
        if not self.agent.approvals_on:
            return 0
        ready = await self.agent.recover_parked(self.platform)
        for request_id in ready:
            await self.go_on(request_id)
        waiting = await self.agent.threads_with_deferred(self.platform)
        for key in waiting:
            await self.launch.deferred(key, partial(self.turns.answer_deferred, key))
        return len(ready) + len(waiting)

    async def _prompt(self, request_id: str) -> ApprovalPrompt | None:
        found = await self.agent.parked(request_id)
        return found[0] if found is not None else None
