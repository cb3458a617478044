"""The asking test server (tests/mcp_servers/asks.py) checked with the plain `mcp` client, on both
protocol eras, so tests of nerve's own client can rely on what it does."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client, MCPError, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
SHARED = pytest.mark.asyncio(loop_scope="module")
PROTOCOLS = ["2025-11-25", "2026-07-28"]
WAIT = 10.0

Reply = Callable[[types.ElicitRequestParams], types.ElicitResult]


def decline(params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


@dataclass
class Person:
    """Stands in for the person the client asks: records every request and answers with `reply`."""

    reply: Reply = decline
    asked: list[types.ElicitRequestParams] = field(default_factory=list)
    both_asked: asyncio.Event = field(default_factory=asyncio.Event)
    wait_for_two: bool = False

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        if self.wait_for_two:
            # Answer only once two requests are open at the same time.
            if len(self.asked) >= 2:
                self.both_asked.set()
            await asyncio.wait_for(self.both_asked.wait(), WAIT)
        return self.reply(params)

    def reset(self, reply: Reply = decline) -> None:
        self.reply, self.asked, self.wait_for_two = reply, [], False
        self.both_asked = asyncio.Event()


@dataclass
class Inbox:
    """What the server sent besides results: notifications and log messages, as they arrive."""

    notes: list[Any] = field(default_factory=list)
    logs: list[types.LoggingMessageNotificationParams] = field(default_factory=list)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def on_message(self, message: Any) -> None:
        async with self.arrived:
            self.notes.append(message)
            self.arrived.notify_all()

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        async with self.arrived:
            self.logs.append(params)
            self.arrived.notify_all()

    async def wait_for(self, ready: Callable[[], bool]) -> None:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(ready), WAIT)


@dataclass
class Asks:
    client: Client
    person: Person
    inbox: Inbox
    protocol: str


def server_params(*args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "tests.mcp_servers.asks", *args], cwd=str(ROOT)
    )


async def held(make: Callable[[], Client]) -> AsyncIterator[Client]:
    """A client opened and closed in one task of its own: fixture setup and teardown run in
    different tasks, and the client's cancel scopes must be left in the task that entered them."""
    opened: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def hold() -> None:
        async with make() as client:
            opened.set_result(client)
            await done.wait()

    holder = asyncio.create_task(hold())
    async with asyncio.timeout(30):
        either: list[asyncio.Future[Any]] = [opened, holder]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    yield opened.result()
    done.set()
    async with asyncio.timeout(30):
        await holder


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=PROTOCOLS)
async def asks(request: pytest.FixtureRequest) -> AsyncIterator[Asks]:
    """The server pinned to one protocol era, and a client in "auto" mode that ends up speaking it."""
    person, inbox = Person(), Inbox()
    protocol: str = request.param

    def make() -> Client:
        return Client(
            server_params("--protocol", protocol),
            elicitation_callback=person,
            message_handler=inbox.on_message,
            logging_callback=inbox.on_log,
            log_level="info",
        )

    async for client in held(make):
        assert client.protocol_version == protocol
        yield Asks(client, person, inbox, protocol)


def text(result: types.CallToolResult) -> str:
    assert not result.is_error, result.content
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


FULL_ORDER: dict[str, Any] = {
    "name": "Ada",
    "email": "ada@example.com",
    "website": "https://ada.example.com",
    "delivery_date": "2026-12-24",
    "deliver_at": "2026-12-24T18:30:00Z",
    "quantity": 2,
    "tip": 12.5,
    "extra_cheese": True,
    "size": "large",
    "crust": "thin",
    "toppings": ["mushroom", "olive"],
}


@SHARED
async def test_order_pizza_asks_with_every_field_kind_and_echoes_the_answer(asks: Asks) -> None:
    asks.person.reset(lambda params: types.ElicitResult(action="accept", content=FULL_ORDER))
    result = await asyncio.wait_for(asks.client.call_tool("order_pizza", {}), WAIT)
    assert text(result) == f"accepted: {json.dumps(FULL_ORDER, sort_keys=True)}"

    (params,) = asks.person.asked
    assert isinstance(params, types.ElicitRequestFormParams)
    schema = params.requested_schema
    props = schema["properties"]
    assert set(props) == set(FULL_ORDER)
    assert schema["required"] == ["name", "email"]
    assert props["name"]["minLength"] == 2
    assert {
        name: props[name].get("format") for name in ("email", "website", "delivery_date", "deliver_at")
    } == {
        "email": "email",
        "website": "uri",
        "delivery_date": "date",
        "deliver_at": "date-time",
    }
    assert (props["quantity"]["type"], props["quantity"]["minimum"], props["quantity"]["maximum"]) == (
        "integer",
        1,
        10,
    )
    assert props["quantity"]["default"] == 1
    assert (props["tip"]["type"], props["tip"]["minimum"], props["tip"]["maximum"]) == ("number", 0, 100)
    assert (props["extra_cheese"]["type"], props["extra_cheese"]["default"]) == ("boolean", False)
    assert props["size"]["enum"] == ["small", "medium", "large"]
    assert props["size"]["enumNames"] == ["Small", "Medium", "Large"]
    assert props["size"]["default"] == "medium"
    assert props["crust"]["oneOf"] == [
        {"const": "thin", "title": "Thin crust"},
        {"const": "thick", "title": "Thick crust"},
    ]
    toppings = props["toppings"]
    assert (toppings["type"], toppings["minItems"], toppings["maxItems"]) == ("array", 0, 3)
    assert len(toppings["items"]["anyOf"]) == 4


@SHARED
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_order_pizza_says_when_it_was_declined_or_cancelled(asks: Asks, action: str) -> None:
    asks.person.reset(lambda params: types.ElicitResult(action=action))  # type: ignore[arg-type]
    result = await asyncio.wait_for(asks.client.call_tool("order_pizza", {}), WAIT)
    assert text(result) == {"decline": "declined", "cancel": "cancelled"}[action]


@SHARED
async def test_the_question_comes_mid_call_on_2025_and_as_an_input_required_result_on_2026(
    asks: Asks,
) -> None:
    asks.person.reset(lambda params: types.ElicitResult(action="accept", content={"colour": "green"}))
    first = await asyncio.wait_for(
        asks.client.session.call_tool("ask_colour", {"label": "x"}, allow_input_required=True), WAIT
    )
    if asks.protocol == "2025-11-25":
        # elicitation/create arrived and was answered while the call was open.
        assert len(asks.person.asked) == 1
        assert isinstance(first, types.CallToolResult)
        assert text(first) == "x: green"
    else:
        assert asks.person.asked == []
        assert isinstance(first, types.InputRequiredResult)
        assert first.input_requests is not None
        (request,) = first.input_requests.values()
        assert isinstance(request, types.ElicitRequest)
        assert request.params.message == "Pick a colour for x"


@SHARED
async def test_two_colour_questions_at_once_each_get_their_own_answer(asks: Asks) -> None:
    colours = {"Pick a colour for left": "red", "Pick a colour for right": "blue"}
    asks.person.reset(
        lambda params: types.ElicitResult(action="accept", content={"colour": colours[params.message]})
    )
    asks.person.wait_for_two = True
    left, right = await asyncio.wait_for(
        asyncio.gather(
            asks.client.call_tool("ask_colour", {"label": "left"}),
            asks.client.call_tool("ask_colour", {"label": "right"}),
        ),
        WAIT,
    )
    assert (text(left), text(right)) == ("left: red", "right: blue")


@SHARED
async def test_ask_secret_asks_for_an_api_token_in_a_form(asks: Asks) -> None:
    asks.person.reset()
    result = await asyncio.wait_for(asks.client.call_tool("ask_secret", {}), WAIT)
    assert text(result) == "declined"
    (params,) = asks.person.asked
    assert isinstance(params, types.ElicitRequestFormParams)
    assert params.requested_schema["properties"]["api_token"]["title"] == "API token"


@SHARED
async def test_sign_in_elsewhere_sends_the_person_to_a_url(asks: Asks) -> None:
    asks.person.reset(lambda params: types.ElicitResult(action="accept"))
    result = await asyncio.wait_for(asks.client.call_tool("sign_in_elsewhere", {}), WAIT)
    assert text(result) == "url accepted"
    (params,) = asks.person.asked
    assert isinstance(params, types.ElicitRequestURLParams)
    assert params.url == "https://login.example.com/authorize?x=1"
    if asks.protocol == "2025-11-25":
        # The id the request carried is the one the completion names.
        assert params.elicitation_id
        await asks.inbox.wait_for(
            lambda: any(
                isinstance(note, types.ElicitCompleteNotification)
                and note.params.elicitation_id == params.elicitation_id
                for note in asks.inbox.notes
            )
        )
    else:
        # 2026-07-28 has neither elicitation ids nor the completion notification.
        assert params.elicitation_id is None
        assert not any(isinstance(note, types.ElicitCompleteNotification) for note in asks.inbox.notes)

    asks.person.reset()
    result = await asyncio.wait_for(asks.client.call_tool("sign_in_elsewhere", {}), WAIT)
    assert text(result) == "url declined"


@SHARED
async def test_slow_count_reports_progress_with_a_known_total(asks: Asks) -> None:
    steps: list[tuple[float, float | None, str | None]] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append((progress, total, message))

    result = await asyncio.wait_for(
        asks.client.call_tool("slow_count", {"n": 3, "pause": 0.01}, progress_callback=progress), WAIT
    )
    assert text(result) == "counted 3"
    assert steps == [(1, 3, "step 1 of 3"), (2, 3, "step 2 of 3"), (3, 3, "step 3 of 3")]


@SHARED
async def test_chatty_sends_an_info_and_a_warning(asks: Asks) -> None:
    result = await asyncio.wait_for(asks.client.call_tool("chatty", {}), WAIT)
    assert text(result) == "logged"
    await asks.inbox.wait_for(lambda: len(asks.inbox.logs) >= 2)
    assert [(log.level, log.data) for log in asks.inbox.logs[-2:]] == [
        ("info", "warming up the oven"),
        ("warning", "the oven is running hot"),
    ]


@SHARED
async def test_give_resources_returns_a_link_and_embedded_text_and_binary(asks: Asks) -> None:
    result = await asyncio.wait_for(asks.client.call_tool("give_resources", {}), WAIT)
    assert not result.is_error
    words, link, markdown, image = result.content
    assert isinstance(words, types.TextContent)
    assert isinstance(link, types.ResourceLink)
    assert isinstance(markdown, types.EmbeddedResource)
    assert isinstance(markdown.resource, types.TextResourceContents)
    assert markdown.resource.mime_type == "text/markdown"
    assert markdown.resource.text.startswith("# Receipt")
    assert isinstance(image, types.EmbeddedResource)
    assert isinstance(image.resource, types.BlobResourceContents)
    assert image.resource.mime_type == "image/png"
    assert base64.b64decode(image.resource.blob).startswith(b"\x89PNG\r\n\x1a\n")
    # The link leads somewhere: the server serves it.
    (contents,) = (await asyncio.wait_for(asks.client.read_resource(str(link.uri)), WAIT)).contents
    assert isinstance(contents, types.TextResourceContents)
    assert contents.text.startswith("# Today's menu")


async def tool_names(client: Client) -> set[str]:
    return {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools}


@SHARED
async def test_grow_and_shrink_tools_change_the_list_and_say_so(asks: Asks) -> None:
    assert "new_tool" not in await tool_names(asks.client)
    if asks.protocol == "2025-11-25":
        before = len(asks.inbox.notes)

        def changed() -> bool:
            return any(isinstance(n, types.ToolListChangedNotification) for n in asks.inbox.notes[before:])

        await asyncio.wait_for(asks.client.call_tool("grow_tools", {}), WAIT)
        await asks.inbox.wait_for(changed)
    else:
        async with asks.client.listen(tools_list_changed=True) as changes:
            await asyncio.wait_for(asks.client.call_tool("grow_tools", {}), WAIT)
            event = await asyncio.wait_for(anext(aiter(changes)), WAIT)
            assert type(event).__name__ == "ToolsListChanged"
    assert "new_tool" in await tool_names(asks.client)
    assert text(await asyncio.wait_for(asks.client.call_tool("new_tool", {}), WAIT)) == "I am new"

    await asyncio.wait_for(asks.client.call_tool("shrink_tools", {}), WAIT)
    assert "new_tool" not in await tool_names(asks.client)


@SHARED
async def test_prompts_take_arguments_and_complete_the_topic(asks: Asks) -> None:
    prompts = {prompt.name: prompt for prompt in (await asks.client.list_prompts()).prompts}
    assert set(prompts) == {"summarize", "hello"}
    arguments = {argument.name: argument.required for argument in prompts["summarize"].arguments or []}
    assert arguments == {"topic": True, "tone": False}
    assert not prompts["hello"].arguments

    got = await asks.client.get_prompt("summarize", {"topic": "welding", "tone": "dry"})
    (message,) = got.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Summarize what you know about welding in a dry tone."

    ref = types.PromptReference(type="ref/prompt", name="summarize")
    completed = await asks.client.complete(ref, {"name": "topic", "value": "wea"})
    assert completed.completion.values == ["weather", "wealth"]
    everything = await asks.client.complete(ref, {"name": "topic", "value": ""})
    assert everything.completion.values == ["weather", "wealth", "welding"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_with_asks_log_set_each_question_asked_and_each_answer_received_is_one_line(
    protocol: str, tmp_path: Path
) -> None:
    """The log tells a test what reached the tool, and how often, even across clients that stopped."""
    log = tmp_path / "asks.log"
    params = server_params("--protocol", protocol)
    params.env = {"ASKS_LOG": str(log)}
    person = Person(lambda params: types.ElicitResult(action="accept", content={"colour": "green"}))
    async with Client(params, elicitation_callback=person) as client:
        result = await asyncio.wait_for(client.call_tool("ask_colour", {"label": "door"}), WAIT)
    assert text(result) == "door: green"
    assert [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] == [
        {"tool": "ask_colour", "question": "colour", "answer": None},
        {
            "tool": "ask_colour",
            "question": "colour",
            "answer": {"action": "accept", "content": {"colour": "green"}},
        },
    ]


def leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_an_unpinned_server_speaks_the_era_the_client_opens_with(mode: str) -> None:
    async with Client(server_params(), mode=mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        assert text(await asyncio.wait_for(client.call_tool("chatty", {}), WAIT)) == "logged"


async def test_a_server_pinned_to_2026_refuses_the_handshake() -> None:
    with pytest.raises(BaseException) as refused:
        async with Client(server_params("--protocol", "2026-07-28"), mode="legacy"):
            pass
    codes = [leaf.error.code for leaf in leaves(refused.value) if isinstance(leaf, MCPError)]
    assert codes == [types.UNSUPPORTED_PROTOCOL_VERSION]


# --- Streamable HTTP --------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_over_http_the_server_asks_reports_progress_and_prints_its_url(protocol: str) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.mcp_servers.asks",
        "--http",
        "0",
        "--protocol",
        protocol,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        url = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        person, inbox = Person(), Inbox()
        person.reply = lambda params: types.ElicitResult(
            action="accept", content=None if params.mode == "url" else {"colour": "green"}
        )
        steps: list[str | None] = []

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            steps.append(message)

        async with Client(url, elicitation_callback=person, message_handler=inbox.on_message) as client:
            assert client.protocol_version == protocol
            colour = await asyncio.wait_for(client.call_tool("ask_colour", {"label": "door"}), WAIT)
            assert text(colour) == "door: green"
            signed_in = await asyncio.wait_for(client.call_tool("sign_in_elsewhere", {}), WAIT)
            assert text(signed_in) == "url accepted"
            counted = await asyncio.wait_for(
                client.call_tool("slow_count", {"n": 2, "pause": 0}, progress_callback=progress), WAIT
            )
            assert text(counted) == "counted 2"
        assert steps == ["step 1 of 2", "step 2 of 2"]
        if protocol == "2025-11-25":
            assert any(isinstance(note, types.ElicitCompleteNotification) for note in inbox.notes)
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), WAIT)
