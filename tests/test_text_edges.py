"""Text no front end cleaned still reaches the store and the model as valid UTF-8."""

from __future__ import annotations

from bot.agent import Agent
from bot.types import ConversationKey, Incoming
from tests.fakes.scripted import ScriptedLLM, Step

KEY = ConversationKey(platform="discord", workspace="G1", channel="C1", thread="T1")


async def test_a_lone_surrogate_from_any_front_end_is_stored_and_answered(loop_host, store):
    llm = ScriptedLLM([Step(text="answered")])
    agent = Agent(llm=llm, host=loop_host, store=store, inbox=store)

    reply = await agent.reply(Incoming(key=KEY, text="hello \ud800 there", user_id="U\udcff"))

    assert reply.text == "answered"
    stored = await store.history(KEY)
    assert stored[0].content == "hello \ufffd there"
    assert llm.last_request()[-1].content == "hello \ufffd there"
