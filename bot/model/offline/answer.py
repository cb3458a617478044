"""Reading tool results and writing the offline model's answer from them.

It never invents a value no result contains, and answers for what was asked: places beyond the
searched radius are listed apart, and a result about another area is said to be so.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bot.model.offline.question import WORD, is_number
from bot.text.nesting import loads
from bot.text.render import truncate
from bot.types import ChatMessage, ToolSpec

_OUTDOOR = re.compile(
    r"\b(run|running|jog|jogging|walk|walking|stroll|hike|hiking|bike|biking|cycle|cycling|picnic|"
    r"outdoors?|outside|exercise)\b|跑步|散步|户外|戶外"
)
_ACTIVITY = {"run": "a run", "jog": "a run", "walk": "a walk", "stroll": "a walk", "hike": "a hike"}
_ACTIVITY |= {"bik": "a bike ride", "cycl": "a bike ride", "picnic": "a picnic", "跑步": "a run"}
_GREEN = ("park", "garden", "trail", "track", "green", "forest", "lake", "river", "公园", "公園")
_POOR_AIR = ("unhealthy", "poor", "bad", "hazard", "severe", "污染", "差")
# The host's certainty line before a result (`Tool "x" ran successfully. Its raw result follows:`).
_ANCHOR = re.compile(r"^\s*tool\b.*:\s*$", re.I)
_FAILED_PREFIX = re.compile(r"^\s*tool\s+[\"'`]?[\w.-]+[\"'`]?\s+(?:failed|errored|error)\s*[:.,-]?\s*", re.I)
# The reading verbs a tool's name starts with, left out of its title.
VERBS = {"get", "fetch", "query", "lookup", "look", "search", "find", "list", "simulate", "read", "check"}
_NOISE = {"id", "ok", "success", "meta", "metadata", "source", "version", "request_id", "timestamp"}
_GENERIC_CHILD = {"speed", "direction", "value", "level", "type", "min", "max", "high", "low", "average"}
_LABEL_KEYS = ("category", "level", "quality", "air_quality", "aqi_level", "aqi_category", "description")
# Key suffix → unit, checked in order (so `_ugm3` wins over `_m`).
# fmt: off
_UNITS = (
    ("_ugm3", " µg/m³"), ("_pct", "%"), ("_percent", "%"), ("_kmh", " km/h"), ("_km", " km"),
    ("_meters", " m"), ("_metres", " m"), ("_m", " m"), ("_c", " °C"), ("_f", " °F"), ("_hpa", " hPa"),
)
# fmt: on
# A key that names no unit but says what it measures.
_NAMED_UNITS = (("temp", " °C"), ("humidity", "%"), ("distance", " m"))


@dataclass(frozen=True, slots=True)
class Outcome:
    title: str
    label: str
    args: dict[str, Any]
    data: Any
    text: str
    failed: bool


def tool_title(tool_name: str) -> str:
    """`get_air_quality` → "Air quality": a tool's name as a heading, without its leading verb."""
    words = WORD.findall(tool_name)
    if len(words) > 1 and words[0].lower() in VERBS:
        words = words[1:]
    return " ".join(words).capitalize()


def format_value(value: Any) -> str:
    """A scalar as a person writes it (`yes`, `21`, `0.333333`), not as Python prints it."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.6g}" if abs(value) < 1e6 else str(value)
    return str(value)


def parse_result(content: str) -> tuple[Any, str]:
    """A result's JSON (None when it holds none) and its text, without the host's certainty line."""
    lines = content.strip().splitlines()
    if len(lines) > 1 and _ANCHOR.match(lines[0]):
        lines = lines[1:]
    text = "\n".join(lines).strip()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith(("{", "["))), len(lines))
    try:
        return loads("\n".join(lines[start:])), text
    except ValueError:  # with no line that starts JSON, the empty text, which is none
        return None, text


def read_outcomes(since: Sequence[ChatMessage], tools: Sequence[ToolSpec]) -> list[Outcome]:
    """The results since the question, paired with their calls; a superseded result is skipped."""
    calls = {c.id: c for m in since for c in m.tool_calls}
    specs = {t.name: t for t in tools}
    out: list[Outcome] = []
    for m in (m for m in since if m.role == "tool"):
        call = calls.get(m.tool_call_id or "")
        name = call.name if call else (m.name or "tool")
        try:
            args = loads(call.arguments) if call else {}
        except ValueError:
            args = {}
        args = args if isinstance(args, dict) else {}
        data, text = parse_result(m.content or "")
        if isinstance(data, dict) and set(data) == {"superseded"}:
            continue  # the host replaced an earlier result of a repeated call; the later one counts
        shown = (specs[name].parameters.get("required") if name in specs else None) or list(args)
        label = ", ".join(format_value(args[k]) for k in shown if k in args)
        failed = m.is_error or (isinstance(data, dict) and bool(data.get("error")) and len(data) <= 3)
        out.append(Outcome(tool_title(name), f" for {label}" if label else "", args, data, text, failed))
    return out


def _split_unit(key: str) -> tuple[str, str]:
    """`temperature_c` → (`temperature`, ` °C`); the unit is "" when the key names none."""
    k = key.lower()
    if k.endswith("_ms"):
        return k[:-3], " m/s" if "speed" in k or "wind" in k else " ms"
    for suffix, unit in _UNITS:
        if k.endswith(suffix):
            return k[: -len(suffix)], unit
    return k, next((unit for word, unit in _NAMED_UNITS if word in k), "")


def _metres(key: str, value: float) -> float:
    return float(value) * (1000 if _split_unit(key)[1] == " km" else 1)


def _human(key: str) -> str:
    return " ".join(WORD.findall(key)).lower()


def _item(value: Any) -> str:
    if not isinstance(value, dict):
        return format_value(value)
    name = next((value[k] for k in ("name", "title", "label", "place") if k in value), None)
    kind = next((value[k] for k in ("type", "kind", "category") if k in value), None)
    units = ((v, _split_unit(k)[1]) for k, v in value.items() if is_number(v))
    dist = next((f" {format_value(v)}{unit}" for v, unit in units if unit in (" m", " km")), "")
    if name is None:
        return ", ".join(f"{_human(k)} {format_value(v)}" for k, v in list(value.items())[:3])
    return f"{name}" + (f" ({_human(str(kind))})" if kind else "") + dist


def _is_aqi(key: str, value: Any) -> bool:
    return (key == "aqi" or key.endswith("_aqi")) and is_number(value)


def _label(data: dict[str, Any]) -> str | None:
    """The words that go with an AQI ("Good", "Unhealthy")."""
    return next((data[x] for x in _LABEL_KEYS if isinstance(data.get(x), str)), None)


def _scalar(key: str, value: Any, siblings: dict[str, Any], parent: str) -> str | None:
    if _is_aqi(key.lower(), value):
        label = _label(siblings)
        return f"AQI {format_value(value)}" + (f" ({label})" if label else "")
    if key.lower() in _LABEL_KEYS and any(x.lower() == "aqi" for x in siblings):
        return None  # already shown next to the AQI
    base, unit = _split_unit(key)
    name = f"{parent} {_human(base)}" if parent and _human(base) in _GENERIC_CHILD else _human(base)
    return f"{name} {format_value(value)}{unit if is_number(value) else ''}"


def _listing(values: list[Any]) -> str:
    more = " and more" if len(values) > 5 else ""  # the attachment has them all
    return (", ".join(_item(v) for v in values[:5]) or "none") + more


def _radius_m(data: dict[str, Any], args: dict[str, Any]) -> float | None:
    """The search radius a result was made for, in metres: its own `radius_m`, else the call's."""
    for key, value in data.items():
        if key.lower().startswith("radius") and is_number(value):
            return _metres(key, value)
    given: Any = args.get("radius")
    return float(given) if is_number(given) else None


def _inside(item: Any, radius: float | None) -> bool | None:
    """Whether a listed place lies within the searched radius; None when the result cannot say."""
    if not isinstance(item, dict):
        return None
    flag = next((v for k, v in item.items() if "within" in k.lower() and isinstance(v, bool)), None)
    if flag is not None:
        return flag
    numbers = [(k, v) for k, v in item.items() if is_number(v)]
    named = [(k, v) for k, v in numbers if "distance" in k.lower()]
    lengths = named or [(k, v) for k, v in numbers if _split_unit(k)[1] in (" m", " km")]
    distance = next((_metres(k, v) for k, v in lengths), None)
    return None if distance is None or radius is None else distance <= radius


def _places(key: str, values: list[Any], radius: float | None) -> list[str]:
    """A list of places as notes: the ones within the radius apart from the ones beyond it."""
    name = _human(key).capitalize()
    outside = [v for v in values if _inside(v, radius) is False]
    if not outside:
        return [f"{name}: {_listing(values)}"]
    inside = [v for v in values if _inside(v, radius) is not False]
    bound = f"{format_value(radius)} m" if radius is not None else "the search radius"
    return [f"{name} within {bound}: {_listing(inside)}", f"farther than {bound}: {_listing(outside)}"]


def _within_radius(data: Any, args: dict[str, Any]) -> Any:
    """A result with the places beyond its search radius left out: what "nearby" may rest on."""
    if not isinstance(data, dict):
        return data
    radius = _radius_m(data, args)
    return {
        k: [v for v in value if _inside(v, radius) is not False] if isinstance(value, list) else value
        for k, value in data.items()
    }


def _facts(data: Any, args: dict[str, Any], parent: str = "") -> tuple[list[str], list[str]]:
    """Short phrases and longer notes from a JSON result, in the result's own order."""
    if isinstance(data, list):
        return [], [f"Items: {_listing(data)}"]
    if not isinstance(data, dict):
        return [format_value(data)], []
    phrases: list[str] = []
    notes: list[str] = []
    for key, value in data.items():
        if key.lower() in _NOISE or key.lower().endswith("_id") or value is None or value == "":
            continue
        if isinstance(value, dict):
            if not parent:  # one level of nesting reads fine; deeper is detail for the attachment
                inner = _facts(value, args, _human(key))
                phrases, notes = phrases + inner[0], notes + inner[1]
        elif isinstance(value, list):
            notes.extend(_places(key, value, _radius_m(data, args)))
        elif isinstance(value, str) and len(value.split()) >= 5:
            notes.append(f"{_human(key).capitalize()}: {value}")
        elif args.get(_split_unit(key)[0]) != value:  # the call's own arguments, echoed back, say nothing
            phrases += [phrase] if (phrase := _scalar(key, value, data, parent)) else []
    return phrases, notes


def _line(o: Outcome) -> str:
    if o.failed:
        reason = o.text
        if isinstance(o.data, dict):
            reason = str(next((o.data[k] for k in ("error", "message", "detail") if k in o.data), reason))
        reason = _FAILED_PREFIX.sub("", reason.splitlines()[-1] if reason else "") or "no reason given"
        return f"**{o.title}**{o.label}: the tool failed — {truncate(reason, 200)[0]}"
    if o.data is None:
        return f"**{o.title}**{o.label}: {truncate(' '.join(o.text.split()), 300)[0] or '(empty result)'}"
    phrases, notes = _facts(o.data, o.args)
    body = "; ".join(p for p in [", ".join(phrases[:8]), *notes] if p)
    return f"**{o.title}**{o.label}: {body or 'no details returned'}"


def _find_dict(data: Any, want: Callable[[str, Any], bool]) -> dict[str, Any] | None:
    """The first dict anywhere in `data` holding a key/value that satisfies `want`."""
    if isinstance(data, dict) and any(want(k.lower(), v) for k, v in data.items()):
        return data
    children = data.values() if isinstance(data, dict) else data if isinstance(data, list) else []
    return next((found for c in children if (found := _find_dict(c, want)) is not None), None)


def _value(data: Any, want: Callable[[str, Any], bool]) -> Any:
    home = _find_dict(data, want)
    return None if home is None else next(v for k, v in home.items() if want(k.lower(), v))


def _green(keys: tuple[str, ...], key: str, value: Any) -> bool:
    return key in keys and any(g in str(value).lower() for g in _GREEN)


def _green_spot(results: list[Any]) -> str | None:
    """Where the first park-like place in the results is ("Century Park is 320 m away"), by type first."""
    for keys in (("type", "kind"), ("name",)):
        place = _find_dict(results, functools.partial(_green, keys))
        if place is not None and "name" in place:
            dist = next((v for k, v in place.items() if "distance" in k.lower() and is_number(v)), None)
            return f"{place['name']} is " + (f"{format_value(dist)} m away" if dist is not None else "nearby")
    return None


def _verdict(question: str, results: list[Any], area: str | None) -> str | None:
    """For "is it good for a run?" questions: one sentence weighing air, temperature and a park."""
    found = _OUTDOOR.search(question.lower())
    if found is None:
        return None
    activity = next((v for k, v in _ACTIVITY.items() if found.group(0).startswith(k)), "being outdoors")
    home = _find_dict(results, _is_aqi) or {}
    aqi = _value(home, _is_aqi)
    label = _label(home)
    label = label or _value(results, lambda k, v: k in ("air_quality", "quality") and isinstance(v, str))
    temp = _value(results, lambda k, v: "temp" in k and is_number(v))
    if aqi is not None:
        state: str | None = "good" if aqi <= 50 else "moderate" if aqi <= 100 else "poor"
    elif label:
        poor = any(w in label.lower() for w in _POOR_AIR)
        state = "poor" if poor else "moderate" if "moderate" in label.lower() else "good"
    else:
        state = None
    spot = _green_spot(results)
    air = f"the air{f' in {area}' if area else ''} is {(label or state or '').lower()}"
    air += f" (AQI {format_value(aqi)})" if aqi is not None else ""
    if state == "poor":
        return (
            f"**Not a great time for {activity}**: {air}. Consider going indoors or waiting for cleaner air."
        )
    if state is None:
        if spot:
            return f"**Maybe**: {spot}, but I couldn't get air-quality data to be sure."
        return f"**I can't tell** whether it's good for {activity}: no air-quality data came back."
    warmth = [f"it's {format_value(temp)} °C"] if temp is not None else []
    reasons = [air, *warmth, *([spot] if spot else [])]
    joined = reasons[0] if len(reasons) == 1 else ", ".join(reasons[:-1]) + " and " + reasons[-1]
    comfortable = temp is None or 0 <= temp <= 30
    head = f"Yes, it looks good for {activity}" if state == "good" and comfortable else "Possibly, with care"
    return f"**{head}**: {joined}."


def _area(data: Any) -> str | None:
    """The area a result says it is about (`area_code` and the like), if it names one."""
    items = data.items() if isinstance(data, dict) else []
    return next((v for k, v in items if "area" in k.lower() and isinstance(v, str)), None)


def write_answer(question: str, outcomes: list[Outcome]) -> str:
    """A markdown reply: a verdict when asked for one (about the asked area only), then a line per result."""
    lines = "\n".join(f"- {_line(o)}" for o in outcomes)
    if all(o.failed for o in outcomes):
        return f"Sorry, I couldn't get that information: the service is temporarily unavailable.\n\n{lines}"
    # The areas the calls asked about, in call order: what the answer is for.
    asked = [v for o in outcomes for k, v in o.args.items() if "area" in k.lower() and isinstance(v, str)]
    asked = list(dict.fromkeys(asked))
    ok = [o for o in outcomes if not o.failed]
    elsewhere = [o for o in ok if asked and _area(o.data) not in (None, *asked)]
    here = [_within_radius(o.data, o.args) for o in ok if o not in elsewhere]
    verdict = _verdict(question, here, asked[0] if len(asked) == 1 else None)
    notes = [
        f"Note: {o.label.removeprefix(' for ') or o.title} is in area {_area(o.data)}, not in "
        f"{' or '.join(asked)}, so the {' and '.join(asked)} readings do not describe that spot."
        for o in elsewhere
    ]
    found = "\n\n".join([f"Here's what I found:\n\n{lines}", *notes])
    return f"{verdict}\n\n{found}" if verdict else found
