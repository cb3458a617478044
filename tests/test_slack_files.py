"""Files shared on Slack reach the agent with the message: metadata from the event or files.info,
bytes from Slack's file host with the bot token, nowhere else, within the limit, and after a restart.

Through the fake Slack (its files.info and private file URLs check the bearer token) and the real
bolt app, agent and store. The agent's `reply` is watched to see the `Incoming` it is handed, and
fetches each file there, as the core does while it answers.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from PIL import Image

from adapters.doctor.slack_check import NEEDED_SCOPES, check_slack
from adapters.slack.client import make_client
from adapters.slack.files import FileRef, SlackFiles, file_ref
from bot.agent import Agent
from bot.errors import FileRefused, FileTooBig, FileUnreadable
from bot.types import AgentReply, Incoming, Progress, SharedFile
from tests.fakes.llm_server import Step, reply
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack
from tests.stores import postgres_backend
from tests.test_slack_harness import core, dm, mention, message, rig, settings_for, sign
from tests.test_slack_runner import running

LIMIT = 20 * 2**20


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


PNG = png(32, 24)
CSV = b"city,aqi\nLyon,41\nOslo,12\n"


@dataclass
class Watched:
    """What the agent was handed: each turn's message, and what fetching its files gave."""

    incoming: list[Incoming] = field(default_factory=list)
    fetched: list[dict[str, bytes | FileRefused]] = field(default_factory=list)


def watch(agent: Agent, monkeypatch: pytest.MonkeyPatch, limit: int = LIMIT) -> Watched:
    seen = Watched()
    reply_of: Callable[[Incoming, Progress], Awaitable[AgentReply]] = agent.reply

    async def watching(incoming: Incoming, progress: Progress) -> AgentReply:
        seen.incoming.append(incoming)
        seen.fetched.append({f.name: await fetched(f, limit) for f in incoming.files})
        return await reply_of(incoming, progress)

    monkeypatch.setattr(agent, "reply", watching)
    return seen


async def fetched(shared: SharedFile, limit: int) -> bytes | FileRefused:
    try:
        return await shared.fetch(limit)
    except FileRefused as exc:
        return exc


def ref(described: dict[str, Any]) -> FileRef:
    found = file_ref(described)
    assert found is not None
    return found


def echo(body: dict[str, Any]) -> Step:
    return reply("seen")


async def test_a_mention_with_only_an_image_in_a_thread_is_a_turn_carrying_the_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with rig(tmp_path, echo) as r:
        seen = watch(r.agent, monkeypatch)
        image = r.slack.files.host("screen.png", PNG, "image/png")
        root = "1600000000.005000"
        body = mention(f"<@{BOT_USER_ID}>", thread_ts=root)
        body["event"]["files"] = [image]
        assert await r.deliver(body) == 200
        await r.settle()

        [incoming] = seen.incoming
        [shared] = incoming.files
        assert (shared.name, shared.mime, shared.size, shared.ref) == (
            "screen.png",
            "image/png",
            len(PNG),
            image["id"],
        )
        assert incoming.text == "" and incoming.key.thread == root
        assert seen.fetched == [{"screen.png": PNG}]
        # Fetched by the core as it answers, and above, each time with the bot token.
        downloads = r.slack.files.downloads
        assert downloads and all(
            d.authorized and d.status == 200 and "/download/" in d.path for d in downloads
        )
        assert [p.text for p in r.slack.thread("C0CHANNEL", root)] == ["seen"]  # no "Ask me something"


async def test_a_dm_with_a_csv_hands_the_agent_the_csv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with rig(tmp_path, echo) as r:
        seen = watch(r.agent, monkeypatch)
        body = dm("which city is cleaner?")
        body["event"]["files"] = [r.slack.files.host("air.csv", CSV, "text/csv")]
        await r.deliver(body)
        await r.settle()
        [incoming] = seen.incoming
        assert incoming.text == "which city is cleaner?" and incoming.place is not None and incoming.place.dm
        assert [(f.name, f.mime, f.size) for f in incoming.files] == [("air.csv", "text/csv", len(CSV))]
        assert seen.fetched == [{"air.csv": CSV}]
        assert r.slack.calls_of("files.info") == []  # the event described it


async def test_a_file_share_in_a_dm_naming_only_ids_is_described_by_files_info(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with rig(tmp_path, echo) as r:
        seen = watch(r.agent, monkeypatch)
        first = r.slack.files.host("notes.txt", b"remember the milk", "text/plain")
        second = r.slack.files.host("graph.png", PNG, "image/png")
        body = dm(
            "", subtype="file_share", files=[r.slack.files.id_only(first), r.slack.files.id_only(second)]
        )
        await r.deliver(body)
        await r.settle()
        [incoming] = seen.incoming
        assert [(f.name, f.size) for f in incoming.files] == [("notes.txt", 17), ("graph.png", len(PNG))]
        assert seen.fetched == [{"notes.txt": b"remember the milk", "graph.png": PNG}]
        assert sorted(c.body["file"] for c in r.slack.calls_of("files.info")) == [first["id"], second["id"]]
        assert r.slack.files.downloads and all(d.authorized for d in r.slack.files.downloads)
        assert [p.text for p in r.slack.thread("D0ALICE", body["event"]["ts"])] == ["seen"]


async def test_an_edit_or_a_channel_message_without_a_mention_still_is_no_turn(tmp_path: Path) -> None:
    async with rig(tmp_path, []) as r:
        shared = r.slack.files.host("air.csv", CSV, "text/csv")
        await r.deliver(message("look", subtype="file_share", files=[shared]))
        await r.deliver(dm("edited", subtype="message_changed", files=[shared]))
        await r.settle()
        assert r.llm.requests == [] and r.slack.posted == [] and r.slack.files.downloads == []


async def test_a_file_on_another_host_is_never_requested(tmp_path: Path) -> None:
    async with FakeSlack() as slack, FakeSlack() as elsewhere:
        files = SlackFiles(make_client(settings_for(slack)), slack.api_url)
        try:
            foreign = ref(elsewhere.files.host("secret.txt", b"x", "text/plain"))
            # Slack's own file host sends the download on to another host: not followed.
            bounced = ref(slack.files.host("moved.txt", b"x", "text/plain", redirect=foreign_url(elsewhere)))
            for shared in await files.shared((foreign, bounced)):
                with pytest.raises(FileUnreadable, match="not on Slack's file host"):
                    await shared.fetch(LIMIT)
            assert elsewhere.files.downloads == [] and elsewhere.calls == []
            [redirected] = slack.files.downloads
            assert redirected.status == 302
        finally:
            await files.aclose()


def foreign_url(elsewhere: FakeSlack) -> str:
    return f"{elsewhere.base}/files-pri/T0000TEAM-F00000001/download/secret.txt"


async def test_only_files_slack_com_and_a_custom_api_host_are_trusted() -> None:
    async with FakeSlack() as slack:
        client = make_client(settings_for(slack))
        ours = SlackFiles(client, slack.api_url)
        real = SlackFiles(client, "https://slack.com/api/")
        assert ours.trusts(f"{slack.base}/files-pri/T1-F1/x.png")
        assert ours.trusts("https://files.slack.com/files-pri/T1-F1/x.png")
        assert real.trusts("https://files.slack.com/files-pri/T1-F1/x.png")
        for url in (
            "http://files.slack.com/files-pri/T1-F1/x.png",  # not over HTTPS
            "https://files.slack.com.evil.example/x.png",
            "https://slack.com/files-pri/T1-F1/x.png",
            "https://example.com/x.png",
            f"{slack.base}/x".replace("127.0.0.1", "localhost"),
            "/files-pri/x.png",
        ):
            assert not ours.trusts(url) and not real.trusts(url), url


async def test_a_declared_30_mb_file_is_too_big_without_a_download(tmp_path: Path) -> None:
    async with FakeSlack() as slack:
        files = SlackFiles(make_client(settings_for(slack)), slack.api_url)
        try:
            huge = ref(slack.files.host("dump.log", b"x" * 100, "text/plain", size=30 * 2**20))
            [shared] = await files.shared((huge,))
            assert shared.size == 30 * 2**20
            with pytest.raises(FileTooBig, match=r"dump\.log is 30\.0 MB, over the 20\.0 MB limit"):
                await shared.fetch(LIMIT)
            assert slack.files.downloads == []
        finally:
            await files.aclose()


async def test_a_download_longer_than_it_said_stops_at_the_limit() -> None:
    async with FakeSlack() as slack:
        files = SlackFiles(make_client(settings_for(slack)), slack.api_url)
        try:
            described = slack.files.host("big.log", b"y" * 300_000, "text/plain")
            del described["size"]  # an event without the size: only the download tells
            [shared] = await files.shared((ref(described),))
            with pytest.raises(FileTooBig, match="over the"):
                await shared.fetch(100_000)
            assert await shared.fetch(300_000) == b"y" * 300_000
        finally:
            await files.aclose()


async def test_a_wrong_token_or_a_missing_scope_is_a_plain_refusal_naming_files_read() -> None:
    async with FakeSlack() as slack:
        wrong = SlackFiles(make_client(settings_for(slack, slack_bot_token="xoxb-not-ours")), slack.api_url)
        right = SlackFiles(make_client(settings_for(slack)), slack.api_url)
        try:
            described = slack.files.host("air.csv", CSV, "text/csv")
            [shared] = await wrong.shared((ref(described),))
            with pytest.raises(FileUnreadable, match=r"HTTP 403\): the Slack app needs the files:read scope"):
                await shared.fetch(LIMIT)
            assert [(d.authorized, d.status) for d in slack.files.downloads] == [(False, 403)]

            slack.scopes = [scope for scope in NEEDED_SCOPES if scope != "files:read"]
            [shared] = await right.shared((ref(described),))
            with pytest.raises(
                FileUnreadable, match=r"sign-in page, not air\.csv: the Slack app needs the files:read"
            ):
                await shared.fetch(LIMIT)
            [only_id] = await right.shared((ref(slack.files.id_only(described)),))
            assert only_id.name == f"file {described['id']}"
            with pytest.raises(
                FileUnreadable, match=r"\(missing_scope\): the Slack app needs the files:read"
            ):
                await only_id.fetch(LIMIT)
        finally:
            await wrong.aclose()
            await right.aclose()


async def test_the_bot_token_is_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    async with FakeSlack() as slack, FakeSlack() as elsewhere:
        settings = settings_for(slack, slack_bot_token="xoxb-private-token-0000")
        slack.files.token = "xoxb-private-token-0000"
        files = SlackFiles(make_client(settings), slack.api_url)
        try:
            refs = (
                ref(slack.files.host("a.txt", b"a", "text/plain")),
                ref(elsewhere.files.host("b.txt", b"b", "text/plain")),
                ref({"id": "F404", "mode": "file_access", "file_access": "check_file_info"}),
            )
            for shared in await files.shared(refs):
                await fetched(shared, LIMIT)
        finally:
            await files.aclose()
    assert caplog.records and "xoxb-private-token-0000" not in caplog.text


async def test_a_replayed_event_keeps_its_files_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def model(request: dict[str, Any]) -> Step:
        if not started.is_set():
            started.set()  # the first process stops while the model thinks about this turn
            await release.wait()
            return reply("too late")
        return reply("here it is")

    async with core(tmp_path, model) as c:
        seen = watch(c.agent, monkeypatch)
        settings = settings_for(c.slack)
        image = c.slack.files.host("chart.png", PNG, "image/png")
        root = "1600000000.005100"
        body = mention(f"<@{BOT_USER_ID}> what does this show?", ts=root)
        body["event"]["files"] = [image]
        raw = json.dumps(body)
        async with running(c.agent, settings) as url, aiohttp.ClientSession() as http:
            async with http.post(url, data=raw, headers=sign(raw)) as response:
                assert response.status == 200
            async with asyncio.timeout(10):
                await started.wait()
        release.set()

        [(_, payload)] = await c.store.unfinished_events("slack")
        [kept] = json.loads(payload)["event"]["files"]
        assert kept["id"] == image["id"] and kept["url_private_download"] == image["url_private_download"]
        assert "thumb_64" not in kept and "permalink" not in kept

        async with running(c.agent, settings):
            await c.inbox.wait_finished(body["event_id"])
        _first, replayed = seen.incoming
        assert replayed.replayed and [f.name for f in replayed.files] == ["chart.png"]
        assert seen.fetched[-1] == {"chart.png": PNG}
        assert [p.text for p in c.slack.thread("C0CHANNEL", root)][-1] == "here it is"


async def test_on_postgresql_a_turn_run_as_a_job_still_has_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with postgres_backend() as pg, core(tmp_path, echo, backend=pg) as c:
        seen = watch(c.agent, monkeypatch)
        settings = settings_for(c.slack, nerve_database_url=pg.location)
        body = dm("which city is cleaner?")
        body["event"]["files"] = [c.slack.files.host("air.csv", CSV, "text/csv")]
        raw = json.dumps(body)
        async with running(c.agent, settings) as url, aiohttp.ClientSession() as http:
            async with http.post(url, data=raw, headers=sign(raw)) as response:
                assert response.status == 200
            await c.inbox.wait_finished(str(body["event_id"]), within=30)
        assert seen.fetched == [{"air.csv": CSV}]
        assert [p.text for p in c.slack.thread("D0ALICE", body["event"]["ts"])] == ["seen"]


async def test_doctor_names_a_missing_files_read_scope() -> None:
    async with FakeSlack() as slack:
        slack.scopes = [scope for scope in NEEDED_SCOPES if scope != "files:read"]
        checks = await check_slack(settings_for(slack))
        [scopes] = [check for check in checks if check.name == "slack scopes"]
        assert scopes.status == "warning"
        assert scopes.found == "missing files:read (reading files people share with a message)"


def image_parts(request: dict[str, Any]) -> list[str]:
    """The data URLs of the image parts of a model request's user messages."""
    return [
        part["image_url"]["url"]
        for message in request["messages"]
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]


async def test_a_png_in_a_dm_thread_reaches_the_model_as_an_image_and_the_answer_posts_in_the_thread(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, [reply("A red rectangle.")]) as r:
        root = "1600000000.005200"
        shared = r.slack.files.host("red.png", png(64, 48), "image/png")
        await r.deliver(dm("what is in this picture?", thread_ts=root, subtype="file_share", files=[shared]))
        await r.settle()
        [request] = r.llm.requests
        [url] = image_parts(request)
        head, _, data = url.partition(",")
        assert head.startswith("data:image/") and head.endswith(";base64")
        assert Image.open(io.BytesIO(base64.b64decode(data))).size == (64, 48)
        assert "red.png" in json.dumps(request["messages"])
        [download] = r.slack.files.downloads
        assert download.authorized and download.status == 200
        assert [p.text for p in r.slack.thread("D0ALICE", root)] == ["A red rectangle."]
