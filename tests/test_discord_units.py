"""The Discord adapter's pure parts: parsing into `Incoming`, rendering within Discord's limits, and
`run_discord`'s restart policy against the fake Discord."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any

import discord
import pytest

from adapters.discord.app import RestartPolicy, run_discord
from adapters.discord.approvals import (
    TEMPLATE,
    approval_message,
    approval_view,
    batch_hash,
    call_ref,
    find_call,
    parse,
    shown_hash,
)
from adapters.discord.delivery import CUSTOM_ID_LIMIT
from adapters.discord.incoming import Job, answer_channel, dm_key, job_for, thread_key, to_incoming
from adapters.discord.render import (
    EMBED_TOTAL_LIMIT,
    MESSAGE_LIMIT,
    ResultsCache,
    layout,
    reply_chunks,
    results_view,
)
from bot.errors import ConfigError
from bot.policy.scopes import Place
from bot.types import AgentReply, ApprovalPrompt, Attachment, ConversationKey, PendingCall
from tests.fakes.discord_api import FakeDiscord, FakeUser, settings_for
from tests.markdown_links import DISGUISES, EVIL, disguised_links, previewed_urls


def make_state(fake: FakeDiscord) -> Any:
    """discord.py's own connection state with the fake's guild loaded; no network involved."""
    client = discord.Client(intents=discord.Intents.default())
    state = client._connection
    state.user = discord.ClientUser(state=state, data=fake.bot.payload())  # type: ignore[arg-type]
    guild = discord.Guild(data=fake._guild(), state=state)  # type: ignore[arg-type]
    state._add_guild(guild)
    return state, guild


def message(
    fake: FakeDiscord, state: Any, channel: Any, author: FakeUser, content: str, **kw: Any
) -> discord.Message:
    data = fake._message(channel_id=channel.id, author=author, content=content, **kw)
    return discord.Message(state=state, channel=channel, data=data)  # type: ignore[arg-type]


def test_a_mention_in_a_channel_keys_a_new_conversation_on_the_mention_itself() -> None:
    fake = FakeDiscord()
    state, guild = make_state(fake)
    channel = guild.get_channel(fake.channel_id)
    user = fake.user("ada")
    msg = message(fake, state, channel, user, f"<@{fake.bot.id}>  what's up?", mentions=[fake.bot])
    incoming = to_incoming(msg, fake.bot.id)
    assert incoming is not None
    assert incoming.text == "what's up?"
    assert incoming.key == thread_key(fake.guild_id, fake.channel_id, msg.id)
    assert incoming.event_id == f"m:{msg.id}"
    assert job_for(incoming, kind="message", channel_id=channel.id, message_id=msg.id).open_thread


def test_a_mention_in_a_channel_is_placed_in_its_guild_and_channel() -> None:
    fake = FakeDiscord()
    state, guild = make_state(fake)
    channel = guild.get_channel(fake.channel_id)
    user = fake.user("ada")
    msg = message(fake, state, channel, user, f"<@{fake.bot.id}> hi", mentions=[fake.bot])
    incoming = to_incoming(msg, fake.bot.id)
    assert incoming is not None
    assert incoming.place == Place(
        platform="discord", guild=str(fake.guild_id), channel=str(fake.channel_id), user=str(user.id)
    )
    job = job_for(incoming, kind="message", channel_id=channel.id, message_id=msg.id)
    assert Job.from_json(job.to_json()).incoming.place == incoming.place, "recovered deliveries keep it"


def test_channel_chatter_bots_and_the_bot_itself_are_ignored() -> None:
    fake = FakeDiscord()
    state, guild = make_state(fake)
    channel = guild.get_channel(fake.channel_id)
    assert to_incoming(message(fake, state, channel, fake.user("ada"), "hello all"), fake.bot.id) is None
    other_bot = fake.user("otherbot", bot=True)
    assert (
        to_incoming(
            message(fake, state, channel, other_bot, f"<@{fake.bot.id}> hi", mentions=[fake.bot]), fake.bot.id
        )
        is None
    )
    assert (
        to_incoming(
            message(fake, state, channel, fake.bot, f"<@{fake.bot.id}> hi", mentions=[fake.bot]), fake.bot.id
        )
        is None
    )
    assert (
        to_incoming(
            message(fake, state, channel, fake.user("bo"), f"<@{fake.bot.id}>", mentions=[fake.bot]),
            fake.bot.id,
        )
        is None
    )


def test_messages_in_the_bots_thread_continue_it_without_a_mention() -> None:
    fake = FakeDiscord()
    state, guild = make_state(fake)
    thread_id = fake.snowflake()
    data: Any = {
        "id": str(thread_id),
        "type": 11,
        "guild_id": str(fake.guild_id),
        "parent_id": str(fake.channel_id),
        "owner_id": str(fake.bot.id),
        "name": "t",
        "message_count": 0,
        "member_count": 1,
        "rate_limit_per_user": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": "2026-01-01T00:00:00+00:00",
        },
    }
    thread = discord.Thread(guild=guild, state=state, data=data)
    incoming = to_incoming(message(fake, state, thread, fake.user("ada"), "and tomorrow?"), fake.bot.id)
    assert incoming is not None
    assert incoming.key == thread_key(fake.guild_id, fake.channel_id, thread_id)
    assert incoming.place is not None and incoming.place.channel == str(fake.channel_id), "the parent channel"
    assert incoming.place.guild == str(fake.guild_id) and not incoming.place.dm
    assert answer_channel(incoming.key) == (thread_id, fake.guild_id), "later answers go to the thread"
    assert not job_for(
        incoming, kind="message", channel_id=thread_id, message_id=fake.snowflake()
    ).open_thread

    other: Any = {**data, "owner_id": str(fake.owner.id)}
    someone_elses = discord.Thread(guild=guild, state=state, data=other)
    assert to_incoming(message(fake, state, someone_elses, fake.user("ada"), "chat"), fake.bot.id) is None


def test_a_dm_is_keyed_on_the_user_so_two_users_never_share_one() -> None:
    fake = FakeDiscord()
    state, _ = make_state(fake)
    keys = []
    for name in ("alice", "bob"):
        user = fake.user(name)
        channel_id = fake._channel_for_dm(user)
        channel = discord.DMChannel(me=state.user, state=state, data=fake.channels[channel_id])  # type: ignore[arg-type]
        incoming = to_incoming(message(fake, state, channel, user, "hello"), fake.bot.id)
        assert incoming is not None
        assert incoming.key == dm_key(channel_id, user.id)
        assert incoming.place == Place(
            platform="discord", channel=str(channel_id), dm=True, user=str(user.id)
        )
        assert answer_channel(incoming.key) == (channel_id, None)
        keys.append(incoming.key)
    assert keys[0] != keys[1]


def test_a_job_survives_the_round_trip_through_the_inbox_payload() -> None:
    job = Job(
        kind="message",
        key=dm_key(1, 2),
        text="hi",
        user_id="2",
        user_name="ada",
        event_id="m:3",
        channel_id=1,
        message_id=3,
        open_thread=False,
    )
    assert Job.from_json(job.to_json()) == job


def attachment(i: int, content: str, *, error: bool = False) -> Attachment:
    return Attachment(
        tool_call_id=f"c{i}",
        name="get_environment_status",
        arguments={"area_code": f"A{i:04d}"},
        is_error=error,
        latency_ms=1234.0 if error else 312.0,
        summary="",
        content=content,
    )


def test_long_answers_split_within_2000_characters_and_keep_code_fences_whole() -> None:
    text = "intro\n\n```python\n" + "\n".join(f"print({i})" for i in range(600)) + "\n```\n\nthe end"
    chunks = reply_chunks(
        AgentReply(text=text, attachments=(attachment(1, "{}"), attachment(2, "{}", error=True)))
    )
    assert len(chunks) > 1
    assert all(len(c) <= MESSAGE_LIMIT for c in chunks)
    assert all(c.count("```") % 2 == 0 for c in chunks)
    assert chunks[-1].endswith("-# 🔧 get_environment_status ✓ 312 ms\n-# 🔧 get_environment_status ✗ 1.2 s")


@pytest.mark.parametrize("text", list(DISGUISES.values()), ids=list(DISGUISES))
def test_no_link_in_an_answer_hides_where_it_goes_or_is_previewed(text: str) -> None:
    for chunks in (reply_chunks(AgentReply(text=text)), layout(text, "-# 🔧 lookup ✓ 5 ms")):
        shown = "\n".join(chunks)
        assert disguised_links(shown) == [] and previewed_urls(shown) == [], shown
        assert EVIL in shown


def test_a_url_in_an_answer_stays_clickable_without_a_preview_and_code_is_left_alone() -> None:
    [chunk] = reply_chunks(AgentReply(text="see https://example.com/a_(b). and <https://example.org>"))
    assert chunk == "see <https://example.com/a_(b)>. and <https://example.org>"
    code = "```sh\ncurl https://example.com/v1\n```"
    assert reply_chunks(AgentReply(text=code)) == [code]


def test_a_url_longer_than_a_message_is_cut_and_no_part_of_it_is_previewed() -> None:
    chunks = reply_chunks(AgentReply(text=f"look: https://evil.example/?d={'x' * 5000} done"))
    assert len(chunks) >= 3 and all(len(c) <= MESSAGE_LIMIT for c in chunks)
    assert all(previewed_urls(c) == [] for c in chunks)


def test_results_fit_the_embed_limits_and_spill_into_a_file() -> None:
    huge = json.dumps({"data": "y" * 20000})
    shown = results_view(tuple(attachment(i, huge, error=i == 3) for i in range(14)))
    assert len(shown.embeds) == 10
    assert sum(len(e) for e in shown.embeds) <= EMBED_TOTAL_LIMIT
    assert all(len(e.description or "") <= 4096 for e in shown.embeds)
    assert all((e.description or "").endswith("```") for e in shown.embeds), "fences stay closed"
    assert shown.embeds[3].colour == discord.Colour(0xE74C3C)
    assert shown.file_text is not None and shown.file_text.count("y" * 20000) == 14
    small = results_view((attachment(1, '{"aqi": 42}'),))
    assert small.file_text is None and '"aqi": 42' in (small.embeds[0].description or "")


def test_the_results_cache_keeps_only_the_newest() -> None:
    cache = ResultsCache(capacity=2)
    cache.put("a", ())
    cache.put("b", ())
    assert cache.get("a") == ()
    cache.put("c", ())
    assert cache.get("b") is None and cache.get("a") == () and len(cache) == 2


async def test_a_rejected_token_stops_run_discord_with_a_clear_message() -> None:
    async with FakeDiscord() as fake:
        fake.reject_token = True
        with pytest.raises(ConfigError, match="DISCORD_BOT_TOKEN"):
            async with asyncio.timeout(10):
                await run_discord(object(), settings_for(fake))  # type: ignore[arg-type]
        assert not fake.identify_payloads, "no IDENTIFY spent on a bad token"


async def test_a_missing_token_is_a_config_error() -> None:
    async with FakeDiscord() as fake:
        with pytest.raises(ConfigError, match="DISCORD_BOT_TOKEN is not set"):
            await run_discord(object(), settings_for(fake, discord_bot_token=None))  # type: ignore[arg-type]


async def test_run_discord_restarts_a_dead_client_with_backoff(store: Any) -> None:
    class Agent:
        inbox = store
        approvals = None

    async with FakeDiscord() as fake:
        fake.login_failures = 2
        policy = RestartPolicy(initial=0.05, maximum=0.1)
        runner = asyncio.create_task(run_discord(Agent(), settings_for(fake), policy=policy))  # type: ignore[arg-type]
        try:
            await fake.wait_ready(within=10)
            logins = [r for r in fake.find("GET", "/users/@me")]
            assert [r.status for r in logins] == [400, 400, 200]
            assert logins[1].at - logins[0].at >= 0.05 and logins[2].at - logins[1].at >= 0.1
            assert len(fake.identify_payloads) == 1
        finally:
            runner.cancel()
            with pytest.raises(asyncio.CancelledError):
                await runner


def prompt_with(*calls: PendingCall, reason: str = "Because you asked.") -> ApprovalPrompt:
    return ApprovalPrompt(
        request_id="Rq-123_abcDEF4567",
        key=ConversationKey(platform="discord", workspace="1", channel="2", thread="3"),
        requester="42",
        place="discord:2",
        calls=calls,
        reason=reason,
        expires_at=1_900_000_000.0,
    )


def pending(call_id: str, arguments: dict[str, Any] | None = None, **kw: Any) -> PendingCall:
    return PendingCall(
        call_id=call_id,
        server="notes",
        tool="append_note",
        arguments=arguments if arguments is not None else {"text": call_id},
        call_hash=hashlib.sha256(call_id.encode()).hexdigest(),
        **kw,
    )


def view_buttons(view: discord.ui.View) -> list[dict[str, Any]]:
    """The buttons as Discord receives them, row by row."""
    return [c for row in view.to_components() for c in row["components"]]


def test_button_ids_fit_discord_and_name_an_odd_or_long_call_id_by_its_position() -> None:
    long_id = "toolu_" + "x" * 90
    odd_id = "call:with spaces/and:colons"
    prompt = prompt_with(pending("call_abc123"), pending(long_id), pending(odd_id))
    assert [call_ref(prompt, c) for c in prompt.calls] == ["call_abc123", "~1", "~2"]
    assert find_call(prompt, "~1") == prompt.calls[1] and find_call(prompt, "~9") is None
    view = approval_view(prompt)
    assert view is not None
    ids = [c["custom_id"] for c in view_buttons(view)]
    assert ids and all(len(i) <= CUSTOM_ID_LIMIT for i in ids)
    clicks = [parse(m) for i in ids if (m := re.fullmatch(TEMPLATE, i))]
    assert len(clicks) == len(ids), "every id is routed by the template"
    assert {c.request_id for c in clicks} == {prompt.request_id}
    approve_two = next(c for c in clicks if c.choice == "approve" and c.call == "~1")
    assert approve_two.shown_hash == shown_hash(prompt, "~1") == prompt.calls[1].call_hash[:12]
    assert {c.shown_hash for c in clicks if c.call is None} == {batch_hash(prompt)}


def test_many_calls_stay_within_five_rows_of_five_buttons_and_decided_calls_lose_theirs() -> None:
    prompt = prompt_with(*(pending(f"c{i}") for i in range(12)))
    view = approval_view(prompt)
    assert view is not None
    rows = [c for c in view.to_components()]
    assert len(rows) <= 5 and all(len(r["components"]) <= 5 for r in rows)
    labels = [c["label"] for r in rows for c in r["components"]]
    assert labels[-3:] == ["Approve all", "Deny all", "Always allow here"]

    one = prompt_with(pending("c1"))
    single = approval_view(one)
    assert single is not None
    assert [c["label"] for c in view_buttons(single)] == [
        "Approve",
        "Deny",
        "Always allow here",
    ]
    decided = prompt_with(pending("c1", status="approved", decided_by="42"))
    assert approval_view(decided) is None, "no buttons once nothing waits"


def test_long_arguments_are_shown_in_full_in_an_attached_file_and_embeds_stay_within_limits() -> None:
    big = {"text": "z" * 9000}
    prompt = prompt_with(pending("c1", big), pending("c2"), reason="r" * 2000)
    shown = approval_message(prompt)
    assert len(shown.content) <= MESSAGE_LIMIT
    assert sum(len(e) for e in shown.embeds) <= EMBED_TOTAL_LIMIT
    assert all((e.description or "").endswith("```") for e in shown.embeds), "fences stay closed"
    assert shown.file_text is not None
    assert "z" * 9000 in shown.file_text and "r" * 2000 in shown.file_text
    assert "<@42> or an admin" in shown.content and "<t:1900000000:R>" in shown.content

    small = approval_message(prompt_with(pending("c1")))
    assert small.file_text is None and '"text": "c1"' in (small.embeds[0].description or "")


def test_the_message_shows_each_outcome_and_who_decided_then_how_it_ended() -> None:
    partly = prompt_with(pending("c1", status="approved", decided_by="42"), pending("c2"))
    shown = approval_message(partly)
    outcomes = [f.value for e in shown.embeds for f in e.fields if f.name == "Outcome"]
    assert outcomes == ["✅ approved by <@42>", "⏳ waiting for a decision"]
    assert "Waiting for approval" in shown.content

    done = prompt_with(
        pending("c1", status="approved", decided_by="42"), pending("c2", status="denied", decided_by="7")
    )
    assert "1 approved, 1 denied" in approval_message(done).content
    expired = prompt_with(pending("c1", status="expired", decided_by="expiry"))
    text = approval_message(expired)
    assert "Not approved in time" in text.content and "Expires" not in text.content
