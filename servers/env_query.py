"""env-query: a seed MCP server that reports simulated environmental conditions for an area.

The data is simulated but deterministic: the same area code always gives the same readings, so
conversations, tests and benchmarks can be replayed. Run it over stdio with
`python -m servers.env_query`; it writes logs to stderr only, because stdout carries JSON-RPC.

`NERVE_SEED_DELAY_MS` (or `ENV_QUERY_DELAY_MS`, which wins) makes every call wait that long before
answering, so benchmarks can show what running calls in parallel saves.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Annotated, Literal

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolAnnotations
from pydantic import BaseModel, Field

from servers.stdio import serve_stdio

logger = logging.getLogger("servers.env_query")

AREA_CODE_PATTERN = r"^[A-Z][0-9]{4}$"
_AREA_CODE = re.compile(AREA_CODE_PATTERN)

AqiCategory = Literal[
    "Good", "Moderate", "Unhealthy for Sensitive Groups", "Unhealthy", "Very Unhealthy", "Hazardous"
]

# US EPA PM2.5 breakpoints (µg/m³ → AQI): the readings stay self-consistent across fields.
_PM25_BREAKPOINTS: tuple[tuple[float, float, int, int, AqiCategory], ...] = (
    (0.0, 9.0, 0, 50, "Good"),
    (9.1, 35.4, 51, 100, "Moderate"),
    (35.5, 55.4, 101, 150, "Unhealthy for Sensitive Groups"),
    (55.5, 125.4, 151, 200, "Unhealthy"),
    (125.5, 225.4, 201, 300, "Very Unhealthy"),
    (225.5, 325.4, 301, 500, "Hazardous"),
)
_WIND_DIRECTIONS = ("N", "NE", "E", "SE", "S", "SW", "W", "NW")


class AirQuality(BaseModel):
    aqi: int = Field(description="US AQI, 0-500; higher is worse.")
    category: AqiCategory
    pm25_ugm3: float = Field(description="PM2.5 concentration in µg/m³.")
    primary_pollutant: str


class Wind(BaseModel):
    speed_ms: float = Field(description="Wind speed in m/s.")
    direction: str


class EnvironmentStatus(BaseModel):
    """What `get_environment_status` returns; also its output schema."""

    area_code: str
    air_quality: AirQuality
    temperature_c: float
    humidity_pct: int
    wind: Wind
    outdoor_activity: str = Field(description="One-sentence advice on exercising outdoors now.")
    source: str = "simulated"


def _fraction(digest: bytes, index: int) -> float:
    """A stable number in [0, 1) taken from two bytes of the digest."""
    return int.from_bytes(digest[index : index + 2], "big") / 65536


def _aqi_from_pm25(pm25: float) -> tuple[int, AqiCategory]:
    for low, high, aqi_low, aqi_high, category in _PM25_BREAKPOINTS:
        if pm25 <= high:
            ratio = (max(pm25, low) - low) / (high - low)
            return round(aqi_low + ratio * (aqi_high - aqi_low)), category
    return 500, "Hazardous"


def _advice(aqi: int, temperature: float, wind_speed: float) -> str:
    if aqi > 150:
        return "Avoid outdoor exercise: the air is unhealthy; exercise indoors instead."
    if aqi > 100:
        return "Sensitive groups should skip outdoor exercise; others keep it short and easy."
    if temperature >= 33:
        return "Too hot for a hard run: exercise early in the morning or in the evening, and drink water."
    if temperature <= 0:
        return "Freezing: dress in layers and watch for ice if you go out."
    if wind_speed >= 10:
        return "Strong wind: a sheltered route is better for a run or a ride."
    if aqi > 50:
        return "Acceptable for a run or a walk; unusually sensitive people may want to take it easy."
    return "Good conditions for a run or any outdoor activity."


def environment_status(area_code: str) -> EnvironmentStatus:
    """The simulated readings for one area; a pure function of the code."""
    digest = hashlib.sha256(f"env-query:{area_code}".encode()).digest()
    # Most areas get clean or moderate air and some get bad air, so every branch of the advice occurs.
    pm25 = round(2.0 + _fraction(digest, 0) ** 4 * 160.0, 1)
    aqi, category = _aqi_from_pm25(pm25)
    temperature = round(-5.0 + _fraction(digest, 2) * 43.0, 1)
    humidity = 20 + int(_fraction(digest, 4) * 76)
    wind_speed = round(_fraction(digest, 6) ** 1.5 * 14.0, 1)
    direction = _WIND_DIRECTIONS[digest[8] % len(_WIND_DIRECTIONS)]
    return EnvironmentStatus(
        area_code=area_code,
        air_quality=AirQuality(
            aqi=aqi, category=category, pm25_ugm3=pm25, primary_pollutant="PM2.5" if aqi > 50 else "none"
        ),
        temperature_c=temperature,
        humidity_pct=humidity,
        wind=Wind(speed_ms=wind_speed, direction=direction),
        outdoor_activity=_advice(aqi, temperature, wind_speed),
    )


def area_code_problem(area_code: str) -> str | None:
    """What is wrong with a malformed code, said so that it tells how to fix it; None when it is fine."""
    if _AREA_CODE.fullmatch(area_code):
        return None
    return (
        f"Invalid arguments: area_code {area_code!r} is not an area code. "
        "Use one capital letter followed by four digits, for example 'A1001'."
    )


def check_area_code(area_code: str) -> str:
    """Reject a malformed code in a tool call, with a message that says how to fix it."""
    problem = area_code_problem(area_code)
    if problem is not None:
        raise ToolError(problem)
    return area_code


AreaCode = Annotated[
    str,
    # The schema carries the full rule for clients; the body checks it itself so a mistake gets a
    # message that says how to fix it rather than a bare pattern mismatch.
    Field(
        description="Area code: one capital letter and four digits, e.g. 'A1001'.",
        json_schema_extra={"pattern": AREA_CODE_PATTERN, "minLength": 5, "maxLength": 5},
    ),
]


DESCRIPTION = (
    "Simulated environmental readings for an area code: air quality (US AQI, category, PM2.5), "
    "temperature, humidity, wind, and one line of advice on outdoor activity. Deterministic per code."
)


# It only computes an answer and touches nothing outside itself: clients may run it unasked.
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def outdoor_advice_text(area_code: str, activity: str | None = None) -> str:
    """The question the `outdoor_advice` prompt starts a turn with: what `get_environment_status`
    answers, worded as people ask it (the seed example's question, for any area and activity)."""
    return (
        f"Is the environment in {area_code} good for {activity or 'a run'} right now? "
        "Check its current conditions and advise."
    )


def build_server(delay_s: float = 0.0) -> MCPServer:
    """The server with its one tool and its one prompt; `delay_s` is waited before each answer."""
    server = MCPServer("env-query", version="1.0.0", log_level="WARNING")

    @server.tool(description=DESCRIPTION, annotations=READ_ONLY)
    async def get_environment_status(area_code: AreaCode) -> EnvironmentStatus:
        check_area_code(area_code)
        if delay_s > 0:
            await anyio.sleep(delay_s)
        status = environment_status(area_code)
        logger.info("area %s: aqi %d", area_code, status.air_quality.aqi)
        return status

    # A prompt, so `/prompt` can be tried with the servers nerve ships: `/prompt outdoor_advice A1001`.
    @server.prompt()
    def outdoor_advice(
        area_code: AreaCode,
        activity: Annotated[
            str | None, Field(description="What you want to do outside, e.g. 'a run' (the default).")
        ] = None,
    ) -> str:
        """Whether now is a good time to be outside in an area, from its current conditions."""
        problem = area_code_problem(area_code)
        if problem is not None:
            # An MCP error reaches the client with its message; any other exception is hidden.
            raise MCPError(code=INVALID_PARAMS, message=problem)
        return outdoor_advice_text(area_code, activity)

    return server


def main() -> None:
    serve_stdio(build_server, own_delay_variable="ENV_QUERY_DELAY_MS")


if __name__ == "__main__":
    main()
