import dataclasses
import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent import Agent
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.model.offline import OfflineModel
from bot.turn.context import anchor
from bot.turn.guards import confirm_prompt
from bot.types import ChatMessage, ConversationKey, Incoming, ToolCall, ToolSpec, TurnEvent, no_progress
from tests.conftest import ROOT, seed_servers

SEED_QUESTION = "Is the environment in A1001 good for a run near 31.23, 121.47?"

# Mirrors servers/env_query.py and servers/geo_simulator.py as their tools/list presents them.
ENV = ToolSpec(
    name="get_environment_status",
    description=(
        "Simulated environmental readings for an area code: air quality (US AQI, category, PM2.5), "
        "temperature, humidity, wind, and one line of advice on outdoor activity. Deterministic per code."
    ),
    parameters={
        "type": "object",
        "properties": {
            "area_code": {
                "type": "string",
                "description": "Area code: one capital letter and four digits, e.g. 'A1001'.",
                "pattern": "^[A-Z][0-9]{4}$",
                "minLength": 5,
                "maxLength": 5,
            }
        },
        "required": ["area_code"],
    },
    server="env-query",
    original_name="get_environment_status",
)
GEO = ToolSpec(
    name="simulate_geolocation",
    description=(
        "Simulated location for coordinates: a neighbourhood name, its area code, and nearby places "
        "(parks, cafés, running tracks, hospitals, ...) with distance in metres and bearing."
    ),
    parameters={
        "type": "object",
        "properties": {
            "lat": {"type": "number", "minimum": -90, "maximum": 90, "description": "Latitude in degrees."},
            "lng": {
                "type": "number",
                "minimum": -180,
                "maximum": 180,
                "description": "Longitude in degrees.",
            },
            "radius": {
                "type": "integer",
                "minimum": 10,
                "maximum": 5000,
                "default": 100,
                "description": "Search radius in metres (10-5000).",
            },
        },
        "required": ["lat", "lng"],
    },
    server="geo-simulator",
    original_name="simulate_geolocation",
)
SEED_TOOLS = [ENV, GEO]

ENV_RESULT = {
    "area_code": "A1001",
    "air_quality": {"aqi": 42, "category": "Good", "pm25_ugm3": 7.5, "primary_pollutant": "none"},
    "temperature_c": 22.0,
    "humidity_pct": 55,
    "wind": {"speed_ms": 3.1, "direction": "NE"},
    "outdoor_activity": "Good conditions for a run or any outdoor activity.",
    "source": "simulated",
}
GEO_RESULT = {
    "lat": 31.23,
    "lng": 121.47,
    "place_name": "Riverside District",
    "area_code": "R7372",
    "radius_m": 100,
    "nearby": [
        {"name": "Maple Café", "type": "cafe", "distance_m": 77, "bearing": "N", "within_radius": True},
        {"name": "Century Park", "type": "park", "distance_m": 320, "bearing": "E", "within_radius": False},
    ],
    "source": "simulated",
}


def user(text):
    return ChatMessage(role="user", content=text)


def result(call_id, name, payload, *, is_error=False):
    """A tool message as the host presents it to the model: the certainty line, then the raw result."""
    body = payload if isinstance(payload, str) else json.dumps(payload)
    content = f"{anchor(name, is_error=is_error)}\n{body}"
    return ChatMessage(role="tool", tool_call_id=call_id, name=name, content=content, is_error=is_error)


async def ask(messages, tools=SEED_TOOLS):
    return (await OfflineModel().complete(messages, tools, no_progress)).message


async def test_seed_question_calls_both_tools_in_one_message_with_arguments_from_the_text():
    reply = await ask([user(SEED_QUESTION)])

    assert reply.role == "assistant"
    assert [c.id for c in reply.tool_calls] == ["call_offline_1", "call_offline_2"]
    assert [c.name for c in reply.tool_calls] == ["get_environment_status", "simulate_geolocation"]
    assert all(isinstance(c.arguments, str) for c in reply.tool_calls)
    assert json.loads(reply.tool_calls[0].arguments) == {"area_code": "A1001"}
    assert json.loads(reply.tool_calls[1].arguments) == {"lat": 31.23, "lng": 121.47, "radius": 100}


async def test_after_both_results_the_answer_says_yes_using_data_from_each():
    first = await ask([user(SEED_QUESTION)])
    history = [
        user(SEED_QUESTION),
        first,
        result("call_offline_1", ENV.name, ENV_RESULT),
        result("call_offline_2", GEO.name, GEO_RESULT),
    ]

    reply = await ask(history)

    assert reply.tool_calls == ()
    text = reply.content or ""
    assert text.startswith("**Yes, it looks good for a run**")
    assert "AQI 42 (Good)" in text
    assert "22 °C" in text
    assert "Century Park" in text and "320 m" in text
    assert "for A1001" in text and "for 31.23, 121.47" in text


async def test_unhealthy_air_turns_the_verdict_into_a_no():
    smoggy = {**ENV_RESULT, "air_quality": {"aqi": 168, "category": "Unhealthy", "pm25_ugm3": 88.0}}
    history = [
        user(SEED_QUESTION),
        await ask([user(SEED_QUESTION)]),
        result("call_offline_1", ENV.name, smoggy),
        result("call_offline_2", GEO.name, GEO_RESULT),
    ]

    text = (await ask(history)).content or ""

    assert text.startswith("**Not a great time for a run**")
    assert "AQI 168" in text


async def test_a_failed_tool_is_reported_plainly_with_its_reason():
    history = [
        user(SEED_QUESTION),
        await ask([user(SEED_QUESTION)]),
        result("call_offline_1", ENV.name, ENV_RESULT),
        result(
            "call_offline_2",
            GEO.name,
            'Tool "simulate_geolocation" failed: timed out after 15 s',
            is_error=True,
        ),
    ]

    text = (await ask(history)).content or ""

    assert "**Geolocation** for 31.23, 121.47: the tool failed — timed out after 15 s" in text
    assert "AQI 42" in text


async def test_when_every_tool_failed_the_answer_says_the_service_is_unavailable():
    history = [
        user("How is the air in A1001?"),
        ChatMessage(
            role="assistant",
            tool_calls=(ToolCall(id="call_offline_1", name=ENV.name, arguments='{"area_code": "A1001"}'),),
        ),
        result(
            "call_offline_1", ENV.name, 'Tool "get_environment_status" failed: server crashed', is_error=True
        ),
    ]

    text = (await ask(history)).content or ""

    assert text.startswith("Sorry, I couldn't get that information: the service is temporarily unavailable.")
    assert "server crashed" in text


async def test_hello_gets_a_friendly_reply_and_no_tool_call():
    reply = await ask([user("hello")])

    assert reply.tool_calls == ()
    assert (reply.content or "").startswith("Hello!")
    assert "get_environment_status" in (reply.content or "")


async def test_the_same_conversation_always_gets_the_same_completion():
    history = [user(SEED_QUESTION)]
    model = OfflineModel()

    first = await model.complete(history, SEED_TOOLS, no_progress)
    second = await model.complete(list(history), list(SEED_TOOLS), no_progress)

    assert first == second
    assert first.usage is not None and first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0


async def test_a_tool_whose_required_argument_is_not_in_the_question_is_not_called():
    reply = await ask([user("Is the environmental air quality good today?")])

    assert reply.tool_calls == ()
    text = reply.content or ""
    assert "offline model" in text
    assert "`get_environment_status` looks relevant, but I couldn't find area_code" in text


async def test_a_question_no_tool_fits_gets_the_tool_list_and_an_example_that_works():
    reply = await ask([user("What is the meaning of life?")])

    text = reply.content or ""
    assert reply.tool_calls == ()
    assert "`get_environment_status`" in text and "`simulate_geolocation`" in text
    assert "OPENAI_API_KEY" in text
    example = text.split("For example: “")[1].split("”")[0]
    assert [c.name for c in (await ask([user(example)])).tool_calls] == ["simulate_geolocation"]


async def test_a_confirm_nudge_re_evaluates_the_original_question():
    history = [
        user(SEED_QUESTION),
        ChatMessage(role="assistant", content="It is probably fine."),
        user(confirm_prompt(["get_environment_status"])),
    ]

    reply = await ask(history)

    assert [c.name for c in reply.tool_calls] == ["get_environment_status", "simulate_geolocation"]


async def test_a_value_from_a_first_result_lets_a_second_tool_be_called():
    question = "What's the air like near 31.23, 121.47?"
    first = await ask([user(question)])
    assert [c.name for c in first.tool_calls] == ["simulate_geolocation"]

    second = await ask([user(question), first, result("call_offline_1", GEO.name, GEO_RESULT)])

    assert [(c.id, c.name) for c in second.tool_calls] == [("call_offline_2", "get_environment_status")]
    assert json.loads(second.tool_calls[0].arguments) == {"area_code": "R7372"}


async def test_call_ids_continue_after_calls_earlier_in_the_conversation():
    earlier = [
        user("How is the air in A1001?"),
        ChatMessage(
            role="assistant",
            tool_calls=(ToolCall(id="call_offline_1", name=ENV.name, arguments='{"area_code": "A1001"}'),),
        ),
        result("call_offline_1", ENV.name, ENV_RESULT),
        ChatMessage(role="assistant", content="The air is good."),
    ]

    reply = await ask([*earlier, user("And what is near 31.23, 121.47?")])

    assert [c.id for c in reply.tool_calls] == ["call_offline_2"]


async def test_other_tools_get_enums_named_numbers_and_a_key_field_summary():
    tickets = ToolSpec(
        name="list_tickets",
        description="Open support tickets of a queue.",
        parameters={
            "type": "object",
            "properties": {
                "queue": {"type": "string", "enum": ["billing", "support"]},
                "limit": {"type": "integer", "minimum": 1},
                "verbose": {"type": "boolean", "default": False},
            },
            "required": ["queue", "limit"],
        },
        server="desk",
        original_name="list_tickets",
    )
    question = "Show the 5 latest tickets in the billing queue, limit 5"

    call = (await ask([user(question)], [tickets])).tool_calls[0]
    answer = await ask(
        [
            user(question),
            ChatMessage(role="assistant", tool_calls=(call,)),
            result(call.id, tickets.name, {"open": 2, "oldest_days": 4, "queue": "billing"}),
        ],
        [tickets],
    )

    assert json.loads(call.arguments) == {"queue": "billing", "limit": 5, "verbose": False}
    assert "**Tickets** for billing, 5: open 2, oldest days 4" in (answer.content or "")


async def test_a_trigger_word_selects_a_tool_its_description_does_not_mention():
    weather = ToolSpec(
        name="lookup",
        description="Reads a record.",
        parameters={"type": "object", "properties": {"key": {"type": "string", "pattern": "^K[0-9]+$"}}},
        server="s",
        original_name="lookup",
        triggers=("smog",),
    )

    reply = await ask([user("any smog at K12?")], [weather])

    assert [json.loads(c.arguments) for c in reply.tool_calls] == [{"key": "K12"}]


async def test_with_no_tools_connected_the_reply_says_how_to_add_one():
    text = (await ask([user("What's the weather in A1001?")], [])).content or ""

    assert "No tools are connected" in text


async def test_coordinates_alone_select_a_tool_that_takes_them_with_hemispheres_and_units():
    reply = await ask([user("What's within 2 km of 40.7N, 74.0W?")])

    assert [(c.name, json.loads(c.arguments)) for c in reply.tool_calls] == [
        ("simulate_geolocation", {"lat": 40.7, "lng": -74.0, "radius": 2000})
    ]


async def test_a_chinese_question_works_through_configured_triggers():
    env = dataclasses.replace(ENV, triggers=("环境",))
    geo = dataclasses.replace(GEO, triggers=("附近",))

    reply = await ask([user("A1001的环境适合跑步吗？在31.23, 121.47附近")], [env, geo])

    assert [json.loads(c.arguments) for c in reply.tool_calls] == [
        {"area_code": "A1001"},
        {"lat": 31.23, "lng": 121.47, "radius": 100},
    ]


# --- choosing tools among many that look alike (a filesystem server) ---------------------------------


def files_server(root: Path, log: Path) -> ServerConfig:
    """The filesystem-like test server over stdio, confined to `root`, logging every call to `log`."""
    args = ["-m", "tests.mcp_servers.files", str(root), str(log)]
    return ServerConfig(trustAnnotations=True, command=sys.executable, args=args, cwd=str(ROOT))


@dataclasses.dataclass
class FileServer:
    host: MCPHost
    root: Path
    log: Path

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []


@pytest.fixture(scope="module")
async def files(tmp_path_factory) -> AsyncIterator[FileServer]:
    """The filesystem server over stdio, shared by this module; each test empties its root first."""
    root = tmp_path_factory.mktemp("files")
    log = root.parent / f"{root.name}.log"
    async with MCPHost({"files": files_server(root, log)}, default_timeout=10.0) as host:
        await host.wait_until_ready()
        yield FileServer(host, root, log)


@pytest.fixture
def file_tools(files: FileServer) -> list[ToolSpec]:
    """The filesystem server's tools exactly as the host offers them to a model."""
    return files.host.list_tools()


@pytest.mark.parametrize("question", ["read the file notes.txt", 'read the file "notes.txt"'])
async def test_reading_a_file_through_the_agent_calls_only_read_file_and_leaves_the_file_as_it_was(
    files, store, question
):
    for entry in files.root.iterdir():
        entry.unlink()
    files.log.unlink(missing_ok=True)
    (files.root / "notes.txt").write_text("Buy oat milk and call Ada on Tuesday.\n")
    agent = Agent(llm=OfflineModel(), host=files.host, store=store, inbox=store)
    key = ConversationKey(platform="test", workspace="w", channel="c", thread="files")

    reply = await agent.reply(Incoming(key=key, text=question, user_id="u1"))

    assert [(a.name, a.arguments) for a in reply.attachments] == [("read_file", {"path": "notes.txt"})]
    assert files.calls() == [{"tool": "read_file", "arguments": {"path": "notes.txt"}}]
    assert (files.root / "notes.txt").read_text() == "Buy oat milk and call Ada on Tuesday.\n"
    assert sorted(p.name for p in files.root.iterdir()) == ["notes.txt"]
    assert "Buy oat milk and call Ada on Tuesday." in reply.text


@pytest.mark.parametrize(
    "question",
    [
        "read the file notes.txt",
        'read the file "notes.txt"',
        "Read notes.txt please",
        "what does the file docs/notes.txt say?",
    ],
)
async def test_a_question_about_reading_one_file_calls_read_file_alone(file_tools, question):
    reply = await ask([user(question)], file_tools)

    assert [c.name for c in reply.tool_calls] == ["read_file"]
    assert json.loads(reply.tool_calls[0].arguments)["path"].endswith("notes.txt")


@pytest.mark.parametrize(
    ("question", "tool"),
    [
        ('write "hello" to the file notes.txt', "write_file"),
        ('edit notes.txt: replace "milk" with "tea"', "edit_file"),
        ("move the file notes.txt to old.txt", "move_file"),
        ("rename notes.txt to old.txt", "move_file"),
        ("create the directory archive/2026", "create_directory"),
    ],
)
async def test_a_tool_that_writes_moves_or_creates_is_never_called_even_when_asked_for(
    file_tools, question, tool
):
    reply = await ask([user(question)], file_tools)

    assert all(c.name not in MUTATING_FILE_TOOLS for c in reply.tool_calls), reply.tool_calls
    if not reply.tool_calls:
        assert "offline model" in (reply.content or "")


MUTATING_FILE_TOOLS = {"write_file", "edit_file", "move_file", "create_directory"}


@pytest.mark.parametrize(
    ("description", "name"),
    [
        ("Deletes a record for good.", "purge"),
        ("Sends a message to a channel.", "notify"),
        ("Posts the text to the team's feed.", "share"),
        ("Uploads a file to the bucket.", "bucket_put"),
        ("Updates the status of a ticket.", "ticket_status"),
        ("Reads a record.", "delete_record"),
        ("Reads a record.", "slack_send_message"),
    ],
)
async def test_a_tool_whose_name_or_description_says_it_changes_something_is_never_called(description, name):
    tool = ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        server="s",
        original_name=name,
        triggers=("record", "message", "text", "file", "status"),
    )

    reply = await ask([user('do it for the record "K12": message, text, file, status')], [tool])

    assert reply.tool_calls == ()
    assert f"`{name}`" in (reply.content or "") and "changes" in (reply.content or "")


async def test_a_tool_that_says_it_does_not_write_is_still_called():
    tool = ToolSpec(
        name="peek",
        description="Shows a record. Does not write or delete anything.",
        parameters={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        server="s",
        original_name="peek",
    )

    reply = await ask([user('show the record "K12"')], [tool])

    assert [json.loads(c.arguments) for c in reply.tool_calls] == [{"key": "K12"}]


async def test_a_tool_without_arguments_is_called_only_when_it_is_the_best_match(file_tools):
    listing = await ask([user("list the allowed directories")], file_tools)
    reading = await ask([user("read the file notes.txt")], file_tools)

    assert [c.name for c in listing.tool_calls] == ["list_allowed_directories"]
    assert "list_allowed_directories" not in [c.name for c in reading.tool_calls]


async def test_a_second_tool_is_called_only_for_another_part_of_the_question(file_tools):
    reply = await ask([user("list the directory docs and read the file notes.txt")], file_tools)

    assert sorted((c.name, json.loads(c.arguments)["path"]) for c in reply.tool_calls) == [
        ("list_directory", "docs"),
        ("read_file", "notes.txt"),
    ]


# --- questions written as JSON ----------------------------------------------------------------------

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather forecast for a city.",
    parameters={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris."},
            "country": {"type": "string", "description": "Country the city is in, e.g. France."},
            "days": {"type": "integer", "minimum": 1, "default": 1},
        },
        "required": ["city", "country"],
    },
    server="weather",
    original_name="get_weather",
)


async def test_a_question_written_as_json_fills_arguments_with_its_values_not_its_keys():
    question = 'weather for {"city": "Paris", "country": "France", "days": 3}'

    reply = await ask([user(question)], [WEATHER])

    assert [json.loads(c.arguments) for c in reply.tool_calls] == [
        {"city": "Paris", "country": "France", "days": 3}
    ]


async def test_a_json_key_is_never_taken_as_a_value_for_another_argument():
    reply = await ask([user('weather {"city": "Paris", "country": "France"}')], [WEATHER])

    arguments = json.loads(reply.tool_calls[0].arguments)
    assert "city" not in arguments.values() and "country" not in arguments.values()


async def test_a_required_argument_missing_from_a_json_question_is_asked_for_instead_of_guessed():
    reply = await ask([user('weather {"city": "Paris"}')], [WEATHER])

    assert reply.tool_calls == ()
    text = reply.content or ""
    assert "`get_weather` looks relevant, but I couldn't find country in your message" in text
    assert "Tell me country (Country the city is in, e.g. France)" in text


async def test_one_quoted_value_fills_one_argument_not_every_string_argument():
    reply = await ask([user('weather in "Paris"')], [WEATHER])

    assert reply.tool_calls == ()
    assert "country" in (reply.content or "")


# --- the answer states only what the results say, for the asked area and radius ---------------------

NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)")
AREA_CODE = re.compile(r"\b[A-Z]\d{4}\b")


def numbers_in(value: object) -> set[float]:
    """Every number in a JSON value, including numbers written inside its strings."""
    if isinstance(value, dict):
        return set().union(*(numbers_in(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(numbers_in(v) for v in value)) if value else set()
    if isinstance(value, bool):
        return set()
    if isinstance(value, int | float):
        return {float(value)}
    return {float(n) for n in NUMBER.findall(str(value))}


def segments(text: str) -> list[str]:
    """The answer cut into the clauses a reader takes one at a time."""
    return [s for s in re.split(r"\n|;|(?<=\.)\s", text) if s.strip()]


def assert_states_only_the_results(text: str, results: list[dict], area: str) -> None:
    allowed = set().union(*(numbers_in(r) for r in results))
    assert {float(n) for n in NUMBER.findall(text)} <= allowed, text
    codes = {c for r in results for c in AREA_CODE.findall(json.dumps(r))}
    assert set(AREA_CODE.findall(text)) <= codes, text
    places = [p for r in results for p in r.get("nearby", [])]
    radius = next(r["radius_m"] for r in results if "radius_m" in r)
    beyond = [p["name"] for p in places if p["distance_m"] > radius]
    assert beyond, "the check needs a place beyond the radius"
    for clause in segments(text):
        if re.search(r"nearby|near |within|close", clause, re.I):
            assert not any(name in clause for name in beyond), clause
    location = next((r for r in results if "nearby" in r), None)
    verdict = text.split("\n\n")[0]
    if location is not None and location["area_code"] != area:
        assert not any(p["name"] in verdict for p in places), verdict
        assert location["area_code"] in text and f"not {area}" in text.replace("not in ", "not ")


async def test_the_seed_answer_states_only_numbers_the_results_for_the_asked_area_and_radius_hold(store):
    async with MCPHost(seed_servers(), default_timeout=10.0) as host:
        await host.wait_until_ready()
        agent = Agent(llm=OfflineModel(), host=host, store=store, inbox=store)
        key = ConversationKey(platform="test", workspace="w", channel="c", thread="seed")

        reply = await agent.reply(Incoming(key=key, text=SEED_QUESTION, user_id="u1"))

    by_tool = {a.name: (a.arguments, json.loads(a.content)) for a in reply.attachments}
    assert by_tool["get_environment_status"][0] == {"area_code": "A1001"}
    assert by_tool["simulate_geolocation"][0]["lat"] == 31.23
    assert_states_only_the_results(reply.text, [r for _, r in by_tool.values()], "A1001")


async def test_a_location_in_another_area_is_not_mixed_into_the_asked_areas_verdict():
    history = [
        user(SEED_QUESTION),
        await ask([user(SEED_QUESTION)]),
        result("call_offline_1", ENV.name, ENV_RESULT),
        result("call_offline_2", GEO.name, GEO_RESULT),
    ]

    text = (await ask(history)).content or ""

    assert_states_only_the_results(text, [ENV_RESULT, GEO_RESULT], "A1001")
    assert "Maple Café" in text


async def test_a_park_beyond_the_radius_is_not_called_nearby_even_in_the_same_area():
    same_area = {**GEO_RESULT, "area_code": "A1001"}
    history = [
        user(SEED_QUESTION),
        await ask([user(SEED_QUESTION)]),
        result("call_offline_1", ENV.name, ENV_RESULT),
        result("call_offline_2", GEO.name, same_area),
    ]

    text = (await ask(history)).content or ""

    assert_states_only_the_results(text, [ENV_RESULT, same_area], "A1001")
    assert "Century Park" not in text.split("\n\n")[0]


async def test_a_park_within_the_radius_of_the_same_area_counts_in_the_verdict():
    park = {"name": "Lotus Park", "type": "park", "distance_m": 90, "bearing": "S", "within_radius": True}
    same_area = {**GEO_RESULT, "area_code": "A1001", "nearby": [park, *GEO_RESULT["nearby"]]}
    history = [
        user(SEED_QUESTION),
        await ask([user(SEED_QUESTION)]),
        result("call_offline_1", ENV.name, ENV_RESULT),
        result("call_offline_2", GEO.name, same_area),
    ]

    text = (await ask(history)).content or ""

    assert "Lotus Park is 90 m away" in text.split("\n\n")[0]
    assert_states_only_the_results(text, [ENV_RESULT, same_area], "A1001")


async def test_a_question_holding_json_nested_5000_deep_is_read_as_text_not_a_crash():
    tool = ToolSpec(
        name="get_weather",
        description="Weather of a city",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        server="s",
        original_name="get_weather",
    )
    question = "weather " + '{"city": ' * 5000 + '"Paris"' + "}" * 5000
    messages = [ChatMessage(role="user", content=question)]
    completion = await OfflineModel().complete(messages, [tool], no_progress)
    # Read as text: the one quoted value fills the one string argument.
    assert [json.loads(c.arguments) for c in completion.message.tool_calls] == [{"city": "Paris"}]


async def test_stored_arguments_nested_5000_deep_do_not_crash_the_offline_answer():
    tool = ToolSpec(
        name="echo", description="Echo", parameters={"type": "object"}, server="s", original_name="echo"
    )
    deep = '{"a": ' * 5000 + "1" + "}" * 5000
    messages = [
        ChatMessage(role="user", content="echo it"),
        ChatMessage(role="assistant", tool_calls=(ToolCall(id="c1", name="echo", arguments=deep),)),
        ChatMessage(role="tool", tool_call_id="c1", name="echo", content=deep),
    ]
    completion = await OfflineModel().complete(messages, [tool], no_progress)
    assert completion.message.content


async def test_the_answer_streams_word_by_word_and_tool_calls_stream_no_text():
    events: list[TurnEvent] = []

    async def progress(event: TurnEvent) -> None:
        events.append(event)

    model = OfflineModel()
    calls = (await model.complete([user(SEED_QUESTION)], SEED_TOOLS, progress)).message
    assert calls.tool_calls and events == []

    history = [
        user(SEED_QUESTION),
        calls,
        result("call_offline_1", ENV.name, ENV_RESULT),
        result("call_offline_2", GEO.name, GEO_RESULT),
    ]
    answer = (await model.complete(history, SEED_TOOLS, progress)).message
    pieces = [e.message for e in events]
    assert {e.kind for e in events} == {"text"}
    assert "".join(pieces) == answer.content
    assert len(pieces) > 10
    assert all(len(piece.split()) == 1 for piece in pieces), "one word per piece"


# --- the notes server of the sign-in example (servers/notes_oauth): tools named by words run together


def notes_tool(name: str, description: str) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": {}},
        server="notes",
        original_name=name,
    )


NOTES_TOOLS = [
    notes_tool("whoami", "The name of the person signed in to Notes."),
    notes_tool("list_notes", "Your notes, oldest first."),
]
CONNECT_NOTES = notes_tool("connect_notes", "The notes service acts with each person's own account.")


async def test_who_am_i_calls_the_tool_whose_name_runs_those_words_together():
    reply = await ask([user("who am I at notes?")], NOTES_TOOLS)
    assert [c.name for c in reply.tool_calls] == ["whoami"]

    reply = await ask([user("what are my notes?")], NOTES_TOOLS)
    assert [c.name for c in reply.tool_calls] == ["list_notes"]


async def test_tools_that_replaced_the_called_one_are_weighed_again_for_the_question():
    """A sign-in replaces connect_notes with the server's own tools: the question is then answered."""
    question = user("who am I at notes?")
    first = await ask([question], [CONNECT_NOTES])
    assert [c.name for c in first.tool_calls] == ["connect_notes"]
    connected = result("call_offline_1", CONNECT_NOTES.name, "Connected to notes.")

    second = await ask([question, first, connected], NOTES_TOOLS)
    assert [(c.id, c.name) for c in second.tool_calls] == [("call_offline_2", "whoami")]

    answered = result("call_offline_2", "whoami", {"result": "alice"})
    third = await ask([question, first, connected, second, answered], NOTES_TOOLS)
    assert third.tool_calls == () and "alice" in (third.content or "")
