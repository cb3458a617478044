"""Signing in on this machine: open the browser, and take its answer on a loopback port (RFC 8252).

An answer for another sign-in (a stale tab) is turned away so it cannot spoil the one under way."""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import sys
import webbrowser
from collections.abc import Callable
from functools import partial
from typing import Self
from urllib.parse import parse_qs, urlparse

from mcp.shared.auth import AuthorizationCodeResult

from bot.errors import SignInError

logger = logging.getLogger(__name__)

HOST = "127.0.0.1"
CALLBACK = "/callback"
# How long a person has to finish signing in, by default.
SIGN_IN_WAIT = 300.0
# A browser's request is a few hundred bytes; anything slower or bigger is not a browser.
_REQUEST_LIMIT = 16 * 1024
_REQUEST_WAIT = 10.0

Say = Callable[[str], object]
_TO_STDERR: Say = partial(print, file=sys.stderr, flush=True)


class LoopbackSignIn:
    """Give `redirect_uri` and the two handlers to `NerveOAuth`; `say` shows the person the link."""

    def __init__(
        self, *, say: Say = _TO_STDERR, wait: float = SIGN_IN_WAIT, open_browser: bool = True
    ) -> None:
        self._say = say
        self._wait = wait
        self._open_browser = open_browser
        self._server: asyncio.Server | None = None
        self._port = 0
        # The sign-in under way: the state its link carries, and where the browser's answer goes.
        self._state: str | None = None
        self._answer: asyncio.Future[dict[str, str]] | None = None
        self._browsers: set[asyncio.Task[None]] = set()

    @property
    def redirect_uri(self) -> str:
        if self._server is None:
            raise RuntimeError("LoopbackSignIn is not open: use it as `async with`")
        return f"http://{HOST}:{self._port}{CALLBACK}"

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, HOST, 0, limit=_REQUEST_LIMIT)
        self._port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.cancel()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        # A browser command still running is a thread: it cannot be stopped, only no longer waited for.
        for task in self._browsers:
            task.cancel()

    async def redirect_handler(self, url: str) -> None:
        """Show the sign-in link and open it in the browser; the answer is awaited separately."""
        if self._answer is not None and not self._answer.done():
            self._answer.cancel()  # a new sign-in replaces one nobody finished
        self._state = parse_qs(urlparse(url).query).get("state", [None])[0]
        self._answer = asyncio.get_running_loop().create_future()
        self._say(f"Sign in at {urlparse(url).hostname or 'the server'} in your browser: {url}")
        if self._open_browser:
            # webbrowser blocks (a console browser until it exits): keep it off the event loop.
            task = asyncio.create_task(self._open(url))
            self._browsers.add(task)
            task.add_done_callback(self._browsers.discard)

    async def callback_handler(self) -> AuthorizationCodeResult:
        """The browser's answer to the link just shown; `SignInError` if refused or not in time."""
        if (answer := self._answer) is None:
            raise SignInError("No sign-in was started, so there is nothing to wait for.")
        try:
            async with asyncio.timeout(self._wait):
                params = await answer
        except TimeoutError:
            raise SignInError(
                f"Nobody finished signing in within {self._wait:g} s: start again to get a new link."
            ) from None
        finally:
            if self._answer is answer:
                self._answer = None
        if error := params.get("error"):
            why = params.get("error_description") or error
            raise SignInError(f"The sign-in was not completed ({why}): start again to retry.")
        if not (code := params.get("code")):
            raise SignInError("The browser came back without a sign-in code: start again to retry.")
        return AuthorizationCodeResult(code=code, state=params.get("state"), iss=params.get("iss"))

    async def _open(self, url: str) -> None:
        try:
            opened = await asyncio.to_thread(webbrowser.open, url)
        except Exception as exc:  # webbrowser raises what its browser command raises
            logger.info("could not open a browser: %s", exc)
            opened = False
        if not opened:
            self._say("No browser could be opened here: open the link above yourself.")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(_REQUEST_WAIT):
                head = await reader.readuntil(b"\r\n\r\n")
            status, page = self._answer_browser(head.decode("latin-1").split("\r\n", 1)[0])
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        body = page.encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    def _answer_browser(self, request_line: str) -> tuple[str, str]:
        """Hand a callback to the sign-in waiting for it; the status and page the browser gets."""
        parts = request_line.split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            return "405 Method Not Allowed", _page("Not here", "This address only takes sign-in answers.")
        target = urlparse(parts[1])
        if target.path != CALLBACK:
            return "404 Not Found", _page("Not here", "This address only takes sign-in answers.")
        params = {key: values[0] for key, values in parse_qs(target.query).items()}
        state = params.get("state")
        answer = self._answer
        if answer is None or answer.done() or (state is not None and state != self._state):
            return "400 Bad Request", _page(
                "Sign-in link no longer in use",
                "This sign-in is not the one nerve waits for. Start it again.",
            )
        answer.set_result(params)
        if params.get("error"):
            why = params.get("error_description") or params["error"]
            return "200 OK", _page(
                "Not signed in", f"The sign-in was not completed: {why}. You can close this tab."
            )
        return "200 OK", _page("Connected", "Connected — you can close this tab.")


def _page(title: str, text: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>nerve: {html.escape(title)}</title></head>"
        f"<body><p>{html.escape(text)}</p></body></html>"
    )
