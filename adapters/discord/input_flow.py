"""A server's question on Discord: its message, "Fill in", "Open link", "Decline", and the answers.

Discord opens a modal only in answer to a click, never right after another modal, so a form is
filled in steps: each is checked (`bot.forms.check_answer`) and answered, to that person alone, with
"Continue" or "Fix" (reopening it with what they typed). Earlier steps live in memory, so a restart
mid-form loses them. Discord has no event for a modal closed unsubmitted: the request expires in the
core, which tells the server "cancel". A question parked in a call's result outlives a restart, so
its message is also updated from the click that answered it or from where its request says it is.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any

import discord

from adapters.common.refs import message_ref
from adapters.common.settle import Settled, answer_input, ended
from adapters.common.tasks import Spawn
from adapters.discord.delivery import NO_MENTIONS, acknowledge, landed, parse_message_ref
from adapters.discord.input_message import (
    InputClick,
    button_view,
    link_text,
    plain,
    request_message_at,
    request_text,
    request_view,
    settled_text,
)
from adapters.discord.input_modal import InputModal, Raw, say, steps_of
from adapters.discord.pages import ChannelPage, ChannelPoster
from bot.agent import INPUT_EXPIRED as EXPIRED
from bot.agent import INPUT_GONE as GONE
from bot.agent import Agent
from bot.types import (
    Ask,
    Decline,
    Form,
    InputOutcome,
    InputRequest,
    LinkOpened,
    Progress,
    Submit,
    TurnEvent,
    check_answer,
)

logger = logging.getLogger(__name__)

MAX_DRAFTS = 1000
# Requests whose message may still change, remembered at most (the oldest are forgotten first).
KEPT_REQUESTS = 1000
MODAL_TEMPLATE = re.compile(
    r"nerve:in:m:(?P<request>[A-Za-z0-9_-]{1,24}):(?P<step>[0-9]{1,2}):(?P<boot>[0-9a-f]{8})"
)
NO_FORM = "There is nothing to fill in for this request."
NOT_A_LINK = "This request has no link to open."
RESTARTED = (
    "nerve restarted while you were filling this in, so what you typed was lost. Please fill it in again."
)


async def fix(
    interaction: discord.Interaction[Any], request_id: str, form: Form, errors: Mapping[str, str], step: int
) -> None:
    """What needs fixing, to the person alone, and "Fix" to reopen step `step` with what they typed."""
    lines = ["Some answers need fixing:"]
    for form_field in form.fields:
        if form_field.name in errors:
            lines.append(f"• **{plain(form_field.title, 100)}**: {plain(errors[form_field.name], 400)}")
    lines.append("-# **Fix** reopens the form with what you typed.")
    await say(interaction, "\n".join(lines), button_view(request_id, ("step", "Fix"), step=step))


@dataclass(slots=True)
class Draft:
    """One person's answers so far, the steps that passed, and the request's message once clicked."""

    values: dict[str, Raw] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)
    message: tuple[int, int] | None = None


@dataclass(eq=False)
class InputFlow:
    """The requests of one Discord client. Each request's message is posted, and edited as the request
    ends, in tasks of their own (the progress sink never waits for Discord), in order (`Settled`);
    `sweep` looks for expired requests at once, so a click on an expired question shows its turn going on."""

    _: KW_ONLY
    agent: Agent
    client: discord.Client
    spawn: Spawn
    resume: Callable[[str], None] = lambda request_id: None
    sweep: Callable[[], None] = lambda: None

    # Marks the modals this client opened: a submit of another one comes from before a restart.
    boot: str = field(default_factory=lambda: secrets.token_hex(4), init=False)
    _drafts: OrderedDict[tuple[str, str], Draft] = field(default_factory=OrderedDict, init=False)

    def __post_init__(self) -> None:
        self._settled = Settled(self._edit, parse_message_ref, limit=KEPT_REQUESTS)

    # --- the turn's events ---------------------------------------------------------------------------

    def sink(self, forward: Progress, where: ChannelPoster) -> Progress:
        """The turn's progress sink: requests are shown `where` the turn runs, the rest goes on."""

        async def progress(event: TurnEvent) -> None:
            ask = event.ask
            if ask is not None and ask.input is not None and event.kind == "ask":
                if ask.input.refused is None:
                    self._settled.posting(ask.input.request_id)
                self.spawn(self._post(ask, ask.input, where), f"discord-input-{ask.input.request_id}")
            elif ask is not None and ask.input is not None and event.kind == "ask_done":
                self._settle(ask.input, event.message)
                self._forget(ask.id)
            await forward(event)

        return progress

    # --- the request's message -----------------------------------------------------------------------

    async def _post(self, ask: Ask, request: InputRequest, where: ChannelPoster) -> None:
        """Post the request's message `where` its turn runs and store where, for any process."""
        sent: ChannelPage | None = None
        try:
            # A copy: each request's message replies as the turn's first does (posting forgets that).
            sent = await replace(where).post(request_text(request), view=request_view(request))
        finally:
            if request.refused is None:
                at = (where.channel_id, sent.message.id) if sent else None
                self._settled.posted(request.request_id, at)
        if sent is None:
            logger.warning("could not post the message of input request %s", request.request_id)
        elif request.refused is None:
            try:
                await self.agent.ask_posted(ask, message_ref(where.channel_id, sent.message.id))
            except Exception:
                logger.exception("could not store where input request %s is shown", request.request_id)

    def _settle(self, request: InputRequest, status: str, at: tuple[int, int] | None = None) -> None:
        """Take the buttons off the request's message (here, at `at`, or as stored) and say how it ended."""
        self.spawn(self._settled.settle(request, status, at), f"discord-input-done-{request.request_id}")

    async def _edit(self, where: tuple[int, int], request: InputRequest, status: str) -> bool:
        partial = self.client.get_partial_messageable(where[0]).get_partial_message(where[1])
        edit = partial.edit(content=settled_text(request, status), view=None, allowed_mentions=NO_MENTIONS)
        return await landed(edit, "could not update the message of input request %s", request.request_id)

    # --- clicks --------------------------------------------------------------------------------------

    async def clicked(self, interaction: discord.Interaction[Any], click: InputClick) -> None:
        user = str(interaction.user.id)
        if click.action in ("decline", "open"):
            link = click.action == "open"
            refused = await self._decline_or_open(interaction, click.request_id, user, link=link)
        else:
            refused = await self._open_form(interaction, click.request_id, user, click.step)
        if refused is not None and click.action != "step":
            await self._tidy(interaction, refused)
        if refused is not None and refused.note == EXPIRED:
            self.sweep()

    def _answered(self, request_id: str, outcome: InputOutcome, at: tuple[int, int] | None) -> None:
        """An answer the core took: its message says so and its parked turn goes on. Nothing here
        awaits, so the message shows the answer before anything the server does next."""
        self._forget(request_id)
        if outcome.request is not None and outcome.status is not None:
            self._settle(outcome.request, outcome.status, at)
        if outcome.resume is not None:
            self.resume(outcome.resume)

    async def _tidy(self, interaction: discord.Interaction[Any], refused: InputOutcome) -> None:
        """A click on a request that is over (from before a restart, say): its message says how."""
        status = ended(refused)
        message = interaction.message
        if status is None or refused.request is None or message is None:
            return
        edit = message.edit(
            content=settled_text(refused.request, status), view=None, allowed_mentions=NO_MENTIONS
        )
        await landed(edit, "could not update the message of a finished request", level=logging.INFO)

    async def _open_form(
        self, interaction: discord.Interaction[Any], request_id: str, user: str, step: int
    ) -> InputOutcome | None:
        """Answer the click with the step's modal (its first response); the outcome if refused."""

        outcome = await self.agent.open_input(request_id, user)
        request = outcome.request
        if outcome.note is not None or request is None or request.form is None:
            await say(interaction, outcome.note or NO_FORM)
            return outcome
        steps = steps_of(request.form)
        draft = self._draft(request_id, user)
        draft.message = request_message_at(interaction.message, request_id) or draft.message
        # A later step needs the earlier ones' answers: start from the first one missing.
        step = next((s for s in range(1, step) if s not in draft.done), min(max(1, step), len(steps)))
        modal = InputModal(
            request=request,
            step=step,
            steps=steps,
            values=draft.values,
            boot=self.boot,
            submitted=self._submitted,
        )
        await landed(
            interaction.response.send_modal(modal), "could not open the form of input request %s", request_id
        )
        return None

    async def _decline_or_open(
        self, interaction: discord.Interaction[Any], request_id: str, user: str, *, link: bool
    ) -> InputOutcome | None:
        """A decline, or (URL mode) the asker agreeing to open the link: only then do they get it."""
        if not await acknowledge(interaction):
            return None
        url = None
        if link:
            opened = await self.agent.open_input(request_id, user)
            request = opened.request
            if opened.note is not None or request is None or request.mode != "url" or not request.url:
                await say(interaction, opened.note or NOT_A_LINK)
                return opened
            url = request.url
        outcome = await answer_input(self.agent, request_id, user, LinkOpened() if link else Decline())
        if not outcome.changed:
            await say(interaction, outcome.note or GONE)
            return outcome
        self._answered(request_id, outcome, request_message_at(interaction.message, request_id))
        if url is not None:
            await say(interaction, *link_text(url))
        return None

    # --- submits -------------------------------------------------------------------------------------

    async def _submitted(
        self, interaction: discord.Interaction[Any], request: InputRequest, step: int, raw: dict[str, Raw]
    ) -> None:
        """One step's values: check them; then the next step, or the whole form to the core."""
        assert request.form is not None
        form = request.form
        steps = steps_of(form)
        user = str(interaction.user.id)
        draft = self._draft(request.request_id, user)
        draft.values.update(raw)
        shown = Form(fields=tuple(form.fields[i] for i in steps[step - 1]))
        _, errors = check_answer(shown, raw)
        if not errors:
            draft.done.add(step)
            missing = [s for s in range(1, len(steps) + 1) if s not in draft.done]
            if missing:
                view = button_view(request.request_id, ("step", "Continue"), step=missing[0])
                await say(interaction, f"✅ Step {step} of {len(steps)} done.", view)
                return
            if not await acknowledge(interaction):
                return
            outcome = await answer_input(
                self.agent, request.request_id, user, Submit(values=dict(draft.values))
            )
            errors = outcome.errors
        if errors:
            # Wrong answers (this step's, or any the core found in the whole form) reopen their steps.
            wrong = {s for s, at in enumerate(steps, 1) if any(form.fields[i].name in errors for i in at)}
            draft.done -= wrong
            await fix(interaction, request.request_id, form, errors, min(wrong, default=1))
            return
        if not outcome.changed:
            self._forget(request.request_id)
            await say(interaction, outcome.note or GONE)
            return
        at = request_message_at(interaction.message, request.request_id) or draft.message
        self._answered(request.request_id, outcome, at)

    async def stale_submit(self, interaction: discord.Interaction[Any]) -> None:
        """A form opened before a restart was submitted: nothing here knows it, so say what to do."""
        if interaction.type is not discord.InteractionType.modal_submit:
            return
        data: Mapping[str, Any] = interaction.data or {}
        match = MODAL_TEMPLATE.fullmatch(str(data.get("custom_id") or ""))
        if match is None or match["boot"] == self.boot:
            return
        request_id = match["request"]
        outcome = await self.agent.open_input(request_id, str(interaction.user.id))
        if outcome.note is not None:
            await say(interaction, outcome.note)
            return
        await say(interaction, RESTARTED, button_view(request_id, ("fill", "Fill in")))

    # --- drafts --------------------------------------------------------------------------------------

    def _draft(self, request_id: str, user: str) -> Draft:
        key = (request_id, user)
        draft = self._drafts.setdefault(key, Draft())
        self._drafts.move_to_end(key)
        while len(self._drafts) > MAX_DRAFTS:
            self._drafts.popitem(last=False)
        return draft

    def _forget(self, request_id: str) -> None:
        for key in [k for k in self._drafts if k[0] == request_id]:
            del self._drafts[key]
