"""A server's question answered the way every front end answers it (`Agent.answer`), read back as
the question's own outcome so a test can check what the answer did."""

from __future__ import annotations

from bot.agent import Agent
from bot.errors import AskError
from bot.types import Answer, Cancel, Decline, InputAnswer, InputOutcome, LinkOpened, Submit


async def answer_question(agent: Agent, request_id: str, person: str, answer: InputAnswer) -> InputOutcome:
    """`answer` given through `Agent.answer`: its outcome, or for an ask gone or expired (`AskError`)
    the note it carries, with its request when that is known."""
    try:
        answered = await agent.answer(request_id, person, _as_answer(answer))
    except AskError as exc:
        return InputOutcome(changed=False, request=exc.request, note=exc.message)
    assert answered.input is not None, "a question's answer carries its outcome"
    return answered.input


def _as_answer(answer: InputAnswer) -> Answer:
    if answer.action == "accept":
        return Submit(values=answer.content) if answer.content is not None else LinkOpened()
    return Decline() if answer.action == "decline" else Cancel()
