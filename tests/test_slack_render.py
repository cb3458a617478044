"""The pure parts: which events are turns, and how text is made safe and split for Slack."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from adapters.slack.events import Identity, classify, strip_mention
from adapters.slack.render import Level, answer_chunks, escape, render_reply, safe_markdown
from bot.types import AgentReply, Attachment
from tests.markdown_links import DISGUISES, EVIL, disguised_links, disguised_slack_links
from tests.test_slack_harness import dm, mention, message

ME = Identity(user_id="UBOT0001", bot_id="BBOT0001")


def turn_of(body: dict[str, Any], *, follow: bool = False, followed: bool = False, allow_bots: bool = False):
    return classify(body, ME, allow_bots=allow_bots, follow_threads=follow, followed=lambda key: followed)


def test_a_top_level_mention_starts_a_thread_keyed_by_its_own_ts() -> None:
    turn = turn_of(mention("<@UBOT0001> hi", ts="1.5"))
    assert turn is not None and turn.reply_thread_ts == "1.5" and turn.key.thread == "1.5"
    assert turn.incoming.text == "hi" and turn.kind == "answer"


def test_a_top_level_dm_uses_the_fixed_dm_thread_and_is_answered_top_level() -> None:
    turn = turn_of(dm("hello"))
    assert turn is not None and turn.key.thread == "dm" and turn.reply_thread_ts is None
    assert not turn.assistant_thread


def test_an_app_mention_in_a_dm_is_left_to_the_message_event() -> None:
    assert turn_of(mention("<@UBOT0001> hi", channel="D0ALICE")) is None


def test_a_channel_reply_is_followed_only_in_known_threads_without_a_mention() -> None:
    reply = message("more", thread_ts="1.0")
    assert turn_of(reply, follow=True, followed=True) is not None
    assert turn_of(reply, follow=True, followed=False) is None
    assert turn_of(reply, follow=False, followed=True) is None
    assert turn_of(message("<@UBOT0001> more", thread_ts="1.0"), follow=True, followed=True) is None


def test_user_text_is_unescaped_and_the_bot_mention_removed() -> None:
    turn = turn_of(dm("<@UBOT0001|nerve> is 1 &lt; 2 &amp;&amp; 3 &gt; 2?"))
    assert turn is not None and turn.incoming.text == "is 1 < 2 && 3 > 2?"
    assert strip_mention("<@UBOT0001> a <@U2>", "UBOT0001") == " a <@U2>"


def test_escape_breaks_every_ping_and_control_sequence() -> None:
    out = escape("<!here> <!channel> <!everyone> <!subteam^S1> <@U1> <http://a|b> @here & x")
    assert "<" not in out and ">" not in out and "@here" not in out
    assert "&amp; x" in out


def test_markdown_links_show_their_target_but_code_is_left_alone() -> None:
    out = safe_markdown("see [docs](https://evil.example) and `[x](y)` and [https://a.b](https://a.b)")
    assert "docs (https://evil.example)" in out and "[https" not in out
    # Inline code gets only an invisible zero-width space, which no reader turns into a link.
    assert "`[x]\u200b(y)`" in out


@pytest.mark.parametrize("text", list(DISGUISES.values()), ids=list(DISGUISES))
def test_no_link_in_an_answer_hides_where_it_goes(text: str) -> None:
    for chunk in answer_chunks(text):
        assert disguised_links(chunk) == [] and disguised_slack_links(chunk) == [], chunk
        assert EVIL in chunk


PINGS = "<!channel> <!here> <!everyone> <!subteam^S0TEAM|@team> <@U0VICTIM> <@&123> @everyone @here @channel"
_PING = re.compile(r"<[!@#]|(?<![\w\u200b])@(everyone|here|channel)\b")


def test_pings_and_disguised_links_from_a_tool_reach_slack_as_plain_text_at_every_level() -> None:
    hostile = f"{PINGS} [google.com](https://evil.example/?d=1) <https://evil.example|google.com>"
    att = Attachment(
        tool_call_id="c1",
        name=f"lookup {PINGS}",
        arguments={"q": hostile},
        is_error=False,
        latency_ms=5.0,
        summary=hostile,
        content=hostile,
    )
    for level in Level:
        rendered = render_reply(AgentReply(text=hostile, attachments=(att,)), level)
        sent = json.dumps([dataclasses.asdict(m) for m in rendered.messages], ensure_ascii=False)
        assert _PING.search(sent) is None, level
        assert disguised_slack_links(sent) == []
        for out in rendered.messages:
            for block in out.blocks or []:
                if block["type"] == "markdown":
                    assert disguised_links(block["text"]) == []


def test_answer_chunks_fit_a_markdown_block_even_when_escaping_grows_the_text() -> None:
    chunks = answer_chunks("<" * 30_000)
    assert len(chunks) >= 3 and all(len(c) <= 12_000 for c in chunks)
    assert "".join(chunks) == "&lt;" * 30_000


def test_many_tool_calls_overflow_into_earlier_messages_within_the_block_limit() -> None:
    atts = tuple(
        Attachment(
            tool_call_id=f"c{i}",
            name="t",
            arguments={},
            is_error=False,
            latency_ms=1.0,
            summary="",
            content="{}",
        )
        for i in range(60)
    )
    rendered = render_reply(AgentReply(text="done", attachments=atts), Level.RICH)
    assert all(len(m.blocks or []) <= 50 for m in rendered.messages)
    assert sum(1 for m in rendered.messages for b in m.blocks or [] if b["type"] == "container") == 60
    assert (rendered.messages[-1].blocks or [])[-1] == {"type": "markdown", "text": "done"}
    plain = render_reply(AgentReply(text="done", attachments=atts[:2]), Level.PLAIN)
    assert plain.messages[0].blocks == [] and len(plain.messages[0].attachments or []) == 2
