"""Malformed HTTP to /slack/events (no signature needed to send it): each request costs one short
WARNING line (peer, reason; method and path where they could be read), never a traceback or the
client's bytes, at most one line per peer every 10 s. And a signed body that is no Slack delivery at
all (empty, or without a type) is refused with a 400 and one line saying what it lacks.

Real sockets against the real aiohttp server nerve runs (`serve_http`); the throttle's clock is a
fake one, so "10 s later" needs no waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from adapters import http_log
from bot.observe.log_throttle import LogThrottle
from tests.test_slack_harness import rig

GARBAGE = b"\x01\x02" * 100_000  # 200 KB
BAD_REQUESTS = {
    "a bad method": b"G\x00T /slack/events HTTP/1.1\r\nHost: nerve\r\n\r\n",
    "a garbage request line": b"garbage garbage garbage\r\n\r\n",
    "a NUL in a header": b"POST /slack/events HTTP/1.1\r\nHost: nerve\r\nX-A: a\x00b\r\n\r\n",
    "a line over 8 KB": b"POST /slack/events HTTP/1.1\r\nX-Long: " + b"y" * 200_000 + b"\r\n\r\n",
    "200 KB of garbage": GARBAGE,
}
LYING = b"POST /slack/events HTTP/1.1\r\nHost: nerve\r\nContent-Length: 100000\r\n\r\n" + b"z" * 5000


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    fake = FakeClock()
    monkeypatch.setattr(http_log, "_THROTTLE", LogThrottle(http_log.WARN_EVERY, clock=fake))
    yield fake


async def send_raw(url: str, data: bytes) -> bytes:
    """Send `data` and read what comes back until the server closes."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(data)
        with contextlib.suppress(ConnectionError):  # the server answered and closed before reading all
            await writer.drain()
        try:
            return await reader.read()
        except ConnectionError:
            return b""
    finally:
        writer.close()


async def hang_up(url: str, data: bytes) -> None:
    """Send `data`, then close the connection without reading (a body that is never finished)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    _, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(data)
        await writer.drain()
    finally:
        writer.close()


def http_lines(caplog: pytest.LogCaptureFixture, start: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records[start:] if r.name.startswith(("aiohttp", "adapters.http_log"))]


async def test_each_malformed_request_is_one_short_warning_without_traceback_or_body(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    caplog.set_level(logging.DEBUG)
    async with rig(tmp_path, []) as r:
        for what, data in [*BAD_REQUESTS.items(), ("a Content-Length it never sends", LYING)]:
            clock.now += http_log.WARN_EVERY + 1
            start = len(caplog.records)
            if data is LYING:
                await hang_up(r.url, data)
            else:
                answer = await send_raw(r.url, data)
                status_line = answer.split(b"\r\n")[0]
                assert status_line.startswith(b"HTTP/1.") and b" 400 " in status_line, (what, answer[:80])
            lines = http_lines(caplog, start)
            for _ in range(200):  # the handler of a broken-off body logs once the connection ends
                if lines:
                    break
                await asyncio.sleep(0.01)
                lines = http_lines(caplog, start)
            assert len(lines) == 1, (what, [x.getMessage()[:200] for x in lines])
            line = lines[0]
            text = line.getMessage()
            assert line.levelno == logging.WARNING and line.exc_info is None and not line.exc_text, what
            assert text.startswith("refused a malformed HTTP request") and "127.0.0.1" in text, text
            assert len(text) < 300, (what, text)
            assert "\\x01\\x02" not in text and "yyyy" not in text and "zzzz" not in text, text
        assert "POST /slack/events" in text  # the broken-off body: method and path were read


async def test_a_flood_from_one_peer_is_one_line_then_a_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    caplog.set_level(logging.INFO)
    async with rig(tmp_path, []) as r:
        start = len(caplog.records)
        for _ in range(20):
            await send_raw(r.url, GARBAGE)
        clock.now += http_log.WARN_EVERY + 1
        await send_raw(r.url, BAD_REQUESTS["a garbage request line"])
    lines = http_lines(caplog, start)
    assert len(lines) == 2, [x.getMessage() for x in lines]
    assert "(19 more like it held back)" in lines[1].getMessage()
    assert sum(len(x.getMessage()) for x in lines) < 1000


@pytest.mark.parametrize(
    ("body", "content_type", "said"),
    [
        ("", "application/json", "the body is empty"),
        ("{}", "application/json", "the body is empty"),
        ('{"type": null, "event": {"type": "message"}}', "application/json", "no type"),
        ("foo=bar", "application/x-www-form-urlencoded", "no type"),
    ],
)
async def test_a_signed_body_that_is_no_slack_delivery_is_refused_with_one_line_naming_what_it_lacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, body: str, content_type: str, said: str
) -> None:
    caplog.set_level(logging.INFO)
    async with rig(tmp_path, []) as r:
        start = len(caplog.records)
        status, _ = await r.deliver_raw(body, content_type)
    warned = [x for x in caplog.records[start:] if x.levelno >= logging.WARNING]
    assert status == 400
    assert len(warned) == 1 and said in warned[0].getMessage(), [x.getMessage() for x in warned]
    assert "Unhandled request" not in warned[0].getMessage()
