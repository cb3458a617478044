import dataclasses
import json

from bot.context import anchor
from bot.guards import confirm_prompt
from bot.model.offline import OfflineModel
from bot.types import ChatMessage, ToolCall, ToolSpec, no_progress

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
