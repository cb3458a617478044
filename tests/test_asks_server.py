"""The asking test server (tests/mcp_servers/asks.py) checked with the plain `mcp` client, on both
protocol eras, so tests of nerve's own client can rely on what it does."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters

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
class Asks:
    client: Client
    person: Person
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
        await asyncio.wait([opened, holder], return_when=asyncio.FIRST_COMPLETED)
    yield opened.result()
    done.set()
    async with asyncio.timeout(30):
        await holder


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=PROTOCOLS)
async def asks(request: pytest.FixtureRequest) -> AsyncIterator[Asks]:
    """The server pinned to one protocol era, and a client in "auto" mode that ends up speaking it."""
    person = Person()
    protocol: str = request.param

    def make() -> Client:
        return Client(server_params("--protocol", protocol), elicitation_callback=person)

    async for client in held(make):
        assert client.protocol_version == protocol
        yield Asks(client, person, protocol)


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
