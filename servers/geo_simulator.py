"""geo-simulator: a seed MCP server that simulates a location and the places around it.

Deterministic: the same coordinates (to about 100 m) always describe the same neighbourhood, so a
conversation can be replayed. The answer carries an `area_code` that env-query understands, which
lets a model chain "where am I" into "what is the air like here". Run it over stdio with
`python -m servers.geo_simulator`; logs go to stderr only, because stdout carries JSON-RPC.

`NERVE_SEED_DELAY_MS` (or `GEO_SIMULATOR_DELAY_MS`, which wins) makes every call wait that long.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Annotated

import anyio
from mcp.server import MCPServer
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from servers.stdio import serve_stdio

logger = logging.getLogger("servers.geo_simulator")

MIN_RADIUS_M = 10
MAX_RADIUS_M = 5000
# Fewer places than this inside the radius and the nearest ones outside it are added, flagged, so
# a small radius still tells the user what is close. The nearest park is always reported too: the
# outdoor-activity questions this server exists for ("where can I run?") hinge on it.
MIN_PLACES = 3

_DISTRICTS = ("Riverside", "Old Town", "Harbour", "Lakeside", "Hillcrest", "Garden", "Station", "University")
_DISTRICT_KINDS = ("District", "Quarter", "Heights", "Village")
_NAME_WORDS = (
    "Maple",
    "Willow",
    "Cedar",
    "Lotus",
    "Harmony",
    "Sunrise",
    "Jade",
    "Century",
    "Peace",
    "Orchid",
)
_BEARINGS = ("N", "NE", "E", "SE", "S", "SW", "W", "NW")

# (type, label, nearest and farthest distance in metres). Every neighbourhood has a park within
# 500 m: the seed's scenarios ask whether there is somewhere to run nearby.
_PLACE_KINDS: tuple[tuple[str, str, int, int], ...] = (
    ("park", "Park", 120, 480),
    ("cafe", "Café", 30, 350),
    ("running_track", "Running Track", 300, 1800),
    ("hospital", "Hospital", 600, 4000),
    ("metro_station", "Metro Station", 150, 1200),
    ("supermarket", "Supermarket", 80, 700),
    ("gym", "Gym", 200, 1500),
    ("library", "Library", 400, 2500),
    ("pharmacy", "Pharmacy", 60, 600),
    ("park", "Park", 900, 4500),
)


class Place(BaseModel):
    name: str
    type: str
    distance_m: int = Field(description="Straight-line distance from the location, in metres.")
    bearing: str = Field(description="Compass direction from the location.")
    within_radius: bool


class SimulatedLocation(BaseModel):
    """What `simulate_geolocation` returns; also its output schema."""

    lat: float
    lng: float
    place_name: str
    area_code: str = Field(description="Area code of this location, usable with get_environment_status.")
    radius_m: int
    nearby: list[Place] = Field(description="Places sorted by distance, nearest first.")
    source: str = "simulated"


def _digest(*parts: object) -> bytes:
    return hashlib.sha256(":".join(str(p) for p in ("geo-simulator", *parts)).encode()).digest()


def _pick(digest: bytes, index: int, low: int, high: int) -> int:
    """A stable integer in [low, high] from two bytes of the digest."""
    return low + int.from_bytes(digest[index : index + 2], "big") * (high - low) // 65535


def area_code_for(lat: float, lng: float) -> str:
    """The env-query area code of the ~1 km cell holding this point."""
    band = min(25, int((lat + 90.0) / 180.0 * 26))
    cell = _digest("cell", round(lat, 2), round(lng, 2))
    return f"{chr(ord('A') + band)}{_pick(cell, 0, 1000, 9999)}"


def simulate(lat: float, lng: float, radius: int) -> SimulatedLocation:
    """The simulated neighbourhood of a point; a pure function of its arguments."""
    # Coordinates are rounded to ~100 m so a GPS jitter does not change the neighbourhood.
    key = (round(lat, 3), round(lng, 3))
    digest = _digest("place", *key)
    district = (
        f"{_DISTRICTS[digest[0] % len(_DISTRICTS)]} {_DISTRICT_KINDS[digest[1] % len(_DISTRICT_KINDS)]}"
    )
    places: list[tuple[int, str, str, str]] = []
    for index, (kind, label, nearest, farthest) in enumerate(_PLACE_KINDS):
        place = _digest("poi", *key, index)
        name = f"{_NAME_WORDS[place[0] % len(_NAME_WORDS)]} {label}"
        places.append((_pick(place, 1, nearest, farthest), name, kind, _BEARINGS[place[3] % len(_BEARINGS)]))
    places.sort()
    inside = [p for p in places if p[0] <= radius]
    chosen = inside if len(inside) >= MIN_PLACES else places[:MIN_PLACES]
    nearest_park = next(p for p in places if p[2] == "park")
    if nearest_park not in chosen:
        chosen = sorted([*chosen, nearest_park])
    return SimulatedLocation(
        lat=lat,
        lng=lng,
        place_name=district,
        area_code=area_code_for(lat, lng),
        radius_m=radius,
        nearby=[
            Place(
                name=name, type=kind, distance_m=distance, bearing=bearing, within_radius=distance <= radius
            )
            for distance, name, kind, bearing in chosen
        ],
    )


Latitude = Annotated[float, Field(ge=-90, le=90, allow_inf_nan=False, description="Latitude in degrees.")]
Longitude = Annotated[float, Field(ge=-180, le=180, allow_inf_nan=False, description="Longitude in degrees.")]
Radius = Annotated[
    int, Field(ge=MIN_RADIUS_M, le=MAX_RADIUS_M, description="Search radius in metres (10-5000).")
]

DESCRIPTION = (
    "Simulated location for coordinates: a neighbourhood name, its area code, and nearby places "
    "(parks, cafés, running tracks, hospitals, ...) with distance in metres and bearing. "
    "Deterministic per location."
)


# It only computes an answer and touches nothing outside itself: clients may run it unasked.
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def build_server(delay_s: float = 0.0) -> MCPServer:
    """The server with its one tool; `delay_s` is waited before each answer."""
    server = MCPServer("geo-simulator", version="1.0.0", log_level="WARNING")

    @server.tool(description=DESCRIPTION, annotations=READ_ONLY)
    async def simulate_geolocation(lat: Latitude, lng: Longitude, radius: Radius = 100) -> SimulatedLocation:
        if delay_s > 0:
            await anyio.sleep(delay_s)
        location = simulate(lat, lng, radius)
        logger.info("(%s, %s) r=%d: %s", lat, lng, radius, location.place_name)
        return location

    return server


def main() -> None:
    serve_stdio(build_server, own_delay_variable="GEO_SIMULATOR_DELAY_MS")


if __name__ == "__main__":
    main()
