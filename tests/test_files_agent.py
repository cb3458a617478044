"""Files shared with a message, through the agent's façade: the real `openai` client against the local
model service, which records what the model was sent (image parts with their bytes); the store on
SQLite, or PostgreSQL for the tests marked to run on both."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import zipfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import pytest
from PIL import Image

from bot.agent import Agent, AgentConfig
from bot.errors import FileTooBig, ImagesRefused, LLMError
from bot.files.intake import MB, FileRules, file_ids
from bot.model.client import OpenAILLM
from bot.model.offline import OfflineModel
from bot.model.offline.files import files_answer
from bot.model.tokens import IMAGE_TOKENS, estimate_message_tokens
from bot.store.base import ConversationStore
from bot.text.turn_note import with_note
from bot.types import (
    CallContext,
    ChatMessage,
    ConversationKey,
    Incoming,
    ToolResult,
    ToolSpec,
    TurnEvent,
    no_progress,
)
from bot.types.files import SharedFile
from tests.fakes.llm_server import (
    FakeCall,
    FakeLLMServer,
    HttpError,
    Reply,
    Step,
    image_parts,
    reply,
    request_text,
)
from tests.file_samples import bomb_png, image_bytes, make_pdf
from tests.stores import Backend

KEY = ConversationKey(platform="test", workspace="w", channel="D1", thread="t1")
ANSWER = "Here is what I found."


class NoTools:
    """A tool host with no tools: only the built-in ones are offered."""

    def list_tools(self) -> list[ToolSpec]:
        return []

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: CallContext | None = None,
        *,
        screened: ToolSpec | None = None,
    ) -> ToolResult:
        raise AssertionError(f"no tool {name} here")

    def starting(self) -> list[str]:
        return []


class Shared:
    """A file as a front end hands it over, recording each fetch's `max_bytes`; past it, `FileTooBig`
    as a front end streaming the download raises."""

    def __init__(self, name: str, data: bytes, mime: str | None = None, *, declared: int | None = -1) -> None:
        self.data = data
        self.fetches: list[int] = []
        size = len(data) if declared == -1 else declared
        self.file = SharedFile(name=name, fetch=self.fetch, size=size, mime=mime, ref=name)

    async def fetch(self, max_bytes: int) -> bytes:
        self.fetches.append(max_bytes)
        if len(self.data) > max_bytes:
            raise FileTooBig(f"{self.file.name} is larger than {max_bytes} bytes")
        return self.data


class Huge(Shared):
    """A 30 MB file whose bytes are never made: its fetch stops at the limit, as a streaming one does."""

    def __init__(self, name: str, *, declared: bool) -> None:
        super().__init__(name, b"", "text/plain", declared=30 * MB if declared else None)

    async def fetch(self, max_bytes: int) -> bytes:
        self.fetches.append(max_bytes)
        raise FileTooBig(f"{self.file.name} is larger than {max_bytes} bytes")


def said(
    text: str, *files: Shared, key: ConversationKey = KEY, event: str = "e1", user: str = "u1"
) -> Incoming:
    return Incoming(key=key, text=text, user_id=user, event_id=event, files=tuple(s.file for s in files))


@asynccontextmanager
async def agent_on(
    store: ConversationStore, script: Sequence[Step] | Any, *, model: str = "test-model", **options: Any
) -> AsyncIterator[tuple[Agent, FakeLLMServer]]:
    refuse = options.pop("refuse_images", False)
    config = AgentConfig(model=model, **options)
    async with FakeLLMServer(script, refuse_images=refuse) as server:
        llm = OpenAILLM(model=model, base_url=server.base_url, api_key=None, timeout=10.0, max_retries=0)
        try:
            yield Agent(llm=llm, host=NoTools(), store=store, inbox=store, config=config), server
        finally:
            await llm.aclose()


def user_content(request: dict[str, Any], index: int = -1) -> str:
    """The text of the request's `index`-th user message (its text part when it has images)."""
    users = [m for m in request["messages"] if m["role"] == "user"]
    content = users[index]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def tool_names(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or ()}


def shown_size(part: dict[str, Any]) -> tuple[int, int]:
    url = part["image_url"]["url"]
    assert url.startswith("data:image/")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).size


def csv_rows(rows: int) -> bytes:
    lines = ["id,city,reading"] + [f"row{i},city-{i % 17},{i * 7 % 1000}" for i in range(1, rows + 1)]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.both_stores
async def test_an_image_is_sent_as_an_image_part_scaled_to_its_bounded_size(store: ConversationStore) -> None:
    photo = Shared("photo.png", image_bytes((3000, 2000), "PNG"), "image/png")
    async with agent_on(store, [reply(ANSWER)]) as (agent, server):
        answer = await agent.reply(said("what is in this photo?", photo))

    assert answer.text == ANSWER
    (part,) = image_parts(server.requests[0])
    assert shown_size(part) == (1568, 1045)
    assert "photo.png" in user_content(server.requests[0])
    assert photo.fetches == [20 * MB]
    (stored, _) = await store.history(KEY)
    assert stored.files == file_ids(said("", photo)) and "photo.png" in (stored.content or "")


async def test_a_csv_larger_than_the_budget_is_cut_and_read_attachment_pages_through_it(
    store: ConversationStore,
) -> None:
    table = Shared("readings.csv", csv_rows(3000), "text/csv")
    (file_id,) = file_ids(said("", table))
    read = FakeCall(
        name="read_attachment",
        arguments=json.dumps({"attachment_id": file_id, "start_line": 2000, "end_line": 2002}),
    )
    again = FakeCall(
        name="read_attachment",
        arguments=json.dumps({"attachment_id": file_id, "start_line": 2900, "end_line": 2901}),
    )
    script = [Reply(tool_calls=(read,)), Reply(tool_calls=(again,)), reply(ANSWER)]
    async with agent_on(store, script, context_tokens=4000) as (agent, server):
        answer = await agent.reply(said("what was the reading of row1999?", table))

    first = server.requests[0]
    assert "row1,city" in user_content(first) and "row1999,city" not in request_text(first)
    assert "read_attachment" in user_content(first)
    assert {"read_attachment", "search_attachment"} <= tool_names(first)
    assert "row1999,city-10,993" in request_text(server.requests[1])
    assert "row2900," in request_text(server.requests[2])
    assert answer.text == ANSWER


async def test_a_pdfs_text_reaches_the_model(store: ConversationStore) -> None:
    report = Shared("report.pdf", make_pdf(["Quarterly revenue rose", "Margins held at PDFWORD-77"]))
    async with agent_on(store, [reply(ANSWER)]) as (agent, server):
        await agent.reply(said("summarise the report", report))

    text = user_content(server.requests[0])
    assert "report.pdf" in text and "Quarterly revenue rose" in text and "PDFWORD-77" in text


async def test_an_unsupported_file_is_refused_plainly_and_the_message_is_still_stored_and_answered(
    store: ConversationStore,
) -> None:
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr("inside.txt", "never unpacked")
    bundle = Shared("bundle.zip", packed.getvalue(), "application/zip")
    events: list[TurnEvent] = []

    async def progress(event: TurnEvent) -> None:
        events.append(event)

    async with agent_on(store, [reply(ANSWER)]) as (agent, server):
        answer = await agent.reply(said("what is in the bundle?", bundle), progress)

    notice, rest = answer.text.split("\n\n", 1)
    assert notice.startswith("⚠️ bundle.zip") and "PDF" in notice and rest == ANSWER
    assert [e.message for e in events if e.kind == "notice"] == [notice]
    assert "never unpacked" not in request_text(server.requests[0])
    (question, stored_answer) = await store.history(KEY)
    assert "bundle.zip" in (question.content or "") and question.files == file_ids(said("", bundle))
    assert stored_answer.content == answer.text
    assert await store.files_of(KEY) == []


@pytest.mark.both_stores
async def test_a_30_mb_file_is_refused_unread_and_the_message_is_still_stored(
    store: ConversationStore,
) -> None:
    declared = Huge("dump.log", declared=True)
    undeclared = Huge("other.log", declared=False)
    async with agent_on(store, [reply(ANSWER)]) as (agent, _server):
        answer = await agent.reply(said("look at these logs", declared, undeclared))

    assert declared.fetches == []  # its size said enough: nothing was downloaded
    assert undeclared.fetches == [20 * MB]  # read up to the limit, then stopped
    lines = answer.text.splitlines()
    assert lines[0].startswith("⚠️ dump.log (30.0 MB): not read") and "NERVE_MAX_FILE_MB" in lines[0]
    assert lines[1].startswith("⚠️ other.log: not read") and "NERVE_MAX_FILE_MB" in lines[1]
    (question, _) = await store.history(KEY)
    assert "dump.log" in (question.content or "") and "other.log" in (question.content or "")


async def test_files_past_the_count_and_the_turns_total_are_named_and_the_rest_read(
    store: ConversationStore,
) -> None:
    notes = [Shared(f"note{i}.txt", f"note number {i}\n".encode() * 40, "text/plain") for i in range(4)]
    rules = FileRules(max_files=3, max_turn_bytes=1500)
    async with agent_on(store, [reply(ANSWER)], files=rules) as (agent, server):
        answer = await agent.reply(said("read my notes", *notes))

    assert "note number 0" in user_content(server.requests[0])
    assert "note number 2" not in user_content(server.requests[0])
    assert "⚠️ note2.txt: not read" in answer.text and "NERVE_MAX_TURN_FILES_MB" in answer.text
    assert "⚠️ note3.txt: not read, a message may carry 3 files at most" in answer.text
    assert notes[3].fetches == []


async def test_a_decompression_bomb_gets_a_plain_reply_and_no_model_call(store: ConversationStore) -> None:
    bomb = Shared("huge.png", bomb_png(), "image/png")
    async with agent_on(store, []) as (agent, server):
        answer = await agent.reply(said("", bomb))

    assert answer.text.startswith("⚠️ huge.png") and "Traceback" not in answer.text
    assert server.requests == []
    assert [m.role for m in await store.history(KEY)] == ["user", "assistant"]


@pytest.mark.both_stores
async def test_a_model_that_refuses_images_is_told_once_and_remembered_after_a_restart(
    store: ConversationStore, store_backend: Backend
) -> None:
    first = Shared("screen.png", image_bytes((800, 600), "PNG"), "image/png")
    async with agent_on(store, [reply("I only know its name.")], refuse_images=True) as (agent, server):
        answer = await agent.reply(said("what does the screen show?", first))

    assert answer.text.startswith("⚠️ The model cannot see images; I read only screen.png (")
    assert answer.text.endswith("I only know its name.")
    assert len(server.rejected) == 1 and image_parts(server.rejected[0])
    assert image_parts(server.requests[-1]) == []
    assert "screen.png" in user_content(server.requests[-1])

    # A new process on the same database: no image is sent to that model again, nothing told again.
    again = await store_backend.open()
    try:
        second = Shared("other.png", image_bytes((640, 480), "PNG"), "image/png")
        async with agent_on(again, [reply("Still only names.")], refuse_images=True) as (agent, server):
            later = await agent.reply(said("and this one?", second, key=KEY, event="e2"))
        assert server.rejected == []
        assert image_parts(server.requests[0]) == []
        assert later.text == "Still only names."
    finally:
        await again.close()


async def test_with_vision_off_no_image_is_sent_and_nothing_is_refused(store: ConversationStore) -> None:
    photo = Shared("photo.jpg", image_bytes((300, 200), "JPEG"), "image/jpeg")
    async with agent_on(store, [reply(ANSWER)], vision="off") as (agent, server):
        assert (await agent.reply(said("what is this?", photo))).text == ANSWER
    assert image_parts(server.requests[0]) == [] and "photo.jpg" in user_content(server.requests[0])


@pytest.mark.both_stores
async def test_a_follow_up_in_the_next_turn_reaches_the_stored_text(store: ConversationStore) -> None:
    table = Shared("people.csv", b"name,team,city\nAda,core,Paris\nBob,ops,Oslo\n" * 30, "text/csv")
    (file_id,) = file_ids(said("", table))
    read = FakeCall(
        name="read_attachment",
        arguments=json.dumps({"attachment_id": file_id, "start_line": 1, "end_line": 3}),
    )
    script = [reply("It lists people."), Reply(tool_calls=(read,)), reply("The third column is city.")]
    async with agent_on(store, script) as (agent, server):
        await agent.reply(said("what is this file?", table))
        answer = await agent.reply(said("what was the third column of that CSV?", event="e2"))

    follow_up = server.requests[1]
    # The earlier message carries the file's short form; the tools read the rest.
    assert "people.csv" in user_content(follow_up, 0) and "name,team,city" in user_content(follow_up, 0)
    assert "read_attachment" in tool_names(follow_up)
    assert "Ada,core,Paris" in request_text(server.requests[2])
    assert answer.text == "The third column is city."


async def test_an_image_is_sent_again_only_when_a_later_question_refers_to_it(
    store: ConversationStore,
) -> None:
    shot = Shared("screenshot.png", image_bytes((400, 300), "PNG"), "image/png")
    script = [reply("A red square."), reply("Still a red square."), reply("Sunny.")]
    async with agent_on(store, script) as (agent, server):
        await agent.reply(said("what is this?", shot))
        await agent.reply(said("what colour was the screenshot above?", event="e2"))
        await agent.reply(said("thanks, and how is the weather?", event="e3"))

    assert [len(image_parts(r)) for r in server.requests] == [1, 1, 0]
    assert shown_size(image_parts(server.requests[1])[0]) == (400, 300)


CANARY = re.compile(r"FILECANARY-[A-Z]+-\d+")


@pytest.mark.both_stores
async def test_a_file_in_one_persons_dm_never_reaches_another_persons_requests(
    store: ConversationStore,
) -> None:
    ada_dm = ConversationKey(platform="test", workspace="w", channel="D-ada", thread="D-ada")
    bob_dm = ConversationKey(platform="test", workspace="w", channel="D-bob", thread="D-bob")
    secret = Shared("secret.txt", b"launch code FILECANARY-ADA-4711\n", "text/plain")
    bobs = Shared("bob.txt", b"shopping list FILECANARY-BOB-1234\n", "text/plain")
    (ada_file,) = file_ids(said("", secret, key=ada_dm, event="a1"))
    # Bob's model, however misled, asks for Ada's file by its id, and searches for it.
    steal = FakeCall(
        name="read_attachment",
        arguments=json.dumps({"attachment_id": ada_file, "start_line": 1, "end_line": 5}),
    )
    hunt = FakeCall(
        name="search_attachment", arguments=json.dumps({"attachment_id": ada_file, "query": "launch"})
    )

    def respond(request: dict[str, Any]) -> Step:
        text = request_text(request)
        if "bob asks" in text and not any(m["role"] == "tool" for m in request["messages"]):
            return Reply(tool_calls=(steal, hunt))
        return reply("seen: " + " ".join(CANARY.findall(text)))

    async with agent_on(store, respond) as (agent, server):
        await agent.reply(said("keep this", secret, key=ada_dm, event="a1", user="ada"))
        bob_answer = await agent.reply(
            said("bob asks: read the launch code", bobs, key=bob_dm, event="b1", user="bob")
        )
        later = await agent.reply(said("bob asks again", key=bob_dm, event="b2", user="bob"))

    # No request carries two people's canaries: each is sent its own conversation's files only.
    owners = [{c.split("-")[1] for c in CANARY.findall(json.dumps(r))} for r in server.requests]
    assert all(len(found) <= 1 for found in owners), owners
    bobs_requests = [r for r in server.requests if "bob asks" in request_text(r)]
    assert len(bobs_requests) == 3  # the stealing round, its answer, the next turn
    assert not any("FILECANARY-ADA" in json.dumps(r) for r in bobs_requests)
    assert "no file" in request_text(bobs_requests[1])
    assert "FILECANARY-ADA" not in bob_answer.text + later.text
    # Ada's own next turn still reaches her file.
    assert "FILECANARY-ADA-4711" in request_text(server.requests[0])


async def test_the_offline_model_names_an_attachment_with_its_type_size_and_first_lines(
    store: ConversationStore,
) -> None:
    table = Shared("readings.csv", csv_rows(50), "text/csv")
    agent = Agent(llm=OfflineModel(), host=NoTools(), store=store, inbox=store)

    answer = await agent.reply(said("what is this?", table))

    assert "readings.csv" in answer.text and "text/csv" in answer.text
    assert "KB" in answer.text or "bytes" in answer.text
    assert "id,city,reading" in answer.text and "row1,city-1,7" in answer.text
    assert "row40," not in answer.text

    later = await agent.reply(said("what was in that file again?", event="e2"))
    assert "readings.csv" in later.text and "id,city,reading" in later.text


async def test_the_offline_model_leaves_a_file_it_could_not_read_to_the_notice(
    store: ConversationStore,
) -> None:
    table = Shared("readings.csv", csv_rows(5), "text/csv")
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as bundle:
        bundle.writestr("inside.txt", "never unpacked")
    archive = Shared("backup.zip", packed.getvalue(), "application/zip")
    agent = Agent(llm=OfflineModel(), host=NoTools(), store=store, inbox=store)

    answer = await agent.reply(said("what are these?", archive, table))

    assert "backup.zip" in answer.text.split("readings.csv")[0]  # the notice, first
    assert "**not read**" not in answer.text and "You shared **readings.csv**" in answer.text


def test_an_image_part_counts_a_fixed_thousand_tokens_in_the_estimate() -> None:
    text = ChatMessage(role="user", content="what is this?")
    shown = ChatMessage(role="user", content="what is this?", images=("data:image/png;base64,AAAA",) * 2)

    assert estimate_message_tokens([shown]) - estimate_message_tokens([text]) == 2 * IMAGE_TOKENS == 2000


async def test_the_file_tools_are_offered_only_in_a_conversation_with_files(store: ConversationStore) -> None:
    other = ConversationKey(platform="test", workspace="w", channel="D2", thread="t2")
    note = Shared("note.txt", b"hello\n", "text/plain")
    async with agent_on(store, [reply("hi"), reply("read it"), reply("hi again")]) as (agent, server):
        await agent.reply(said("hello", key=other, event="o1"))
        await agent.reply(said("read this", note))
        await agent.reply(said("hello again", key=other, event="o2"))

    assert [bool(tool_names(r) & {"read_attachment", "search_attachment"}) for r in server.requests] == [
        False,
        True,
        False,
    ]


@pytest.mark.parametrize(
    ("message", "refuses"),
    [
        ("Invalid content type. image_url is only supported by certain models.", True),
        ("This model does not support vision input", True),
        ("Multimodal input is not enabled for this deployment", True),
        ("Image exceeds the maximum size of 20 MB", False),
        ("Invalid value for 'temperature'", False),
    ],
)
async def test_only_a_refusal_of_image_input_counts_as_a_model_that_cannot_see(
    message: str, refuses: bool
) -> None:
    async with FakeLLMServer(
        [HttpError(status=400, message=message, type="invalid_request_error")]
    ) as server:
        llm = OpenAILLM(model="m", base_url=server.base_url, api_key=None, timeout=5.0, max_retries=0)
        try:
            with pytest.raises(LLMError) as raised:
                await llm.complete([ChatMessage(role="user", content="hi")], [], no_progress)
        finally:
            await llm.aclose()
    assert isinstance(raised.value, ImagesRefused) is refuses


async def test_a_new_image_is_sent_alone_not_with_the_earlier_one(store: ConversationStore) -> None:
    first = Shared("first.png", image_bytes((400, 300), "PNG"), "image/png")
    second = Shared("second.png", image_bytes((200, 100), "PNG"), "image/png")
    async with agent_on(store, [reply("One."), reply("Two.")]) as (agent, server):
        await agent.reply(said("what is this?", first))
        await agent.reply(said("and this one?", second, event="e2"))

    (part,) = image_parts(server.requests[1])
    assert shown_size(part) == (200, 100)


class Interrupted(Shared):
    """A fetch the process stops during (its first time): the turn ends, the message stays stored."""

    async def fetch(self, max_bytes: int) -> bytes:
        if not self.fetches:
            self.fetches.append(max_bytes)
            raise asyncio.CancelledError
        return await super().fetch(max_bytes)


async def test_a_message_answered_again_after_a_stop_reads_its_files_under_the_same_ids(
    store: ConversationStore,
) -> None:
    table = Interrupted("plan.txt", b"step one: FILEWORD-42\n", "text/plain")
    async with agent_on(store, [reply(ANSWER)]) as (agent, server):
        with pytest.raises(asyncio.CancelledError):
            await agent.reply(said("what is the plan?", table))
        assert [m.files for m in await store.history(KEY)] == [file_ids(said("", table))]

        answer = await agent.reply(said("what is the plan?", table))

    assert answer.text == ANSWER
    assert "FILEWORD-42" in user_content(server.requests[0])
    (question, _) = await store.history(KEY)
    assert [f.id for f in await store.files_of(KEY)] == list(question.files)


class Stalled(Shared):
    """A platform that never sends the bytes."""

    async def fetch(self, max_bytes: int) -> bytes:
        self.fetches.append(max_bytes)
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_file_whose_download_stalls_is_named_and_the_turn_goes_on(store: ConversationStore) -> None:
    stalled = Stalled("slow.txt", b"", "text/plain")
    async with agent_on(store, [reply(ANSWER)], files=FileRules(fetch_seconds=0.2)) as (agent, _server):
        answer = await agent.reply(said("what is in it?", stalled))

    assert answer.text.startswith("⚠️ slow.txt: could not be fetched within 0.2 s")
    assert answer.text.endswith(ANSWER)


def test_the_offline_model_reads_no_file_text_into_the_turns_note() -> None:
    shot = (
        "[file f_1: shot.png · image/png · 2 KB · 300×200 PNG image]\n(the image is attached to this message)"
    )
    message = ChatMessage(
        role="user", content=with_note(f"what is this?\n\n{shot}", "The current time is noon.")
    )

    answer = files_answer("what is this?", [message])

    assert answer is not None and "shot.png" in answer and "can't see images" in answer
    assert "current time" not in answer
