"""Where browsers come back after signing in to a server, and nerve's client metadata document.

The callback answers the sign-in like any ask (the single-use `state` says whose it is) and shows a
private page naming only the server. The turns it lets go on go to the front end (`resume`), else to
any process's sweep, so a sign-in is never lost.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

from aiohttp import web

from bot.agent import Agent
from bot.errors import AskError
from bot.mcp.auth.provider import client_metadata_document
from bot.runtime import CALLBACK_PATH, CLIENT_METADATA_PATH
from bot.text.scrubbing import scrub
from bot.types import SignedIn, SignInFinished

logger = logging.getLogger(__name__)

# Goes on with the parked turns a sign-in let go on; it must not wait for them (the browser waits).
Resume = Callable[[SignedIn], None]

NOT_A_SIGN_IN = (
    "This page is where sign-ins started from nerve come back to. Open it from a Connect button"
    " nerve sent you."
)
FAILED = "Something went wrong on nerve's side while finishing the sign-in. Ask nerve again for a new link."
# The browser keeps no copy of a page reached with a code in its address, and tells nobody the address.
_PRIVATE_PAGE = {
    "Cache-Control": "no-store",
    "Pragma": "no-cache",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
}


@dataclass(eq=False)
class SignInEndpoints:
    agent: Agent
    _: KW_ONLY
    # Without its trailing slash; none (or empty) serves no client metadata document.
    public_url: str | None
    back_to: str
    # Set once the front end can go on with parked turns; until then the sweep does.
    resume: Resume | None = None

    def install(self, app: web.Application) -> None:
        app.router.add_get(CALLBACK_PATH, self.callback)
        if self.public_url:
            app.router.add_get(CLIENT_METADATA_PATH, self.client_metadata)

    async def callback(self, request: web.Request) -> web.Response:
        query = request.query
        if not (state := query.get("state")):
            return page("Not a sign-in", NOT_A_SIGN_IN, status=400)
        finished = SignInFinished(code=query.get("code"), iss=query.get("iss"), error=query.get("error"))
        try:
            # The state alone says whose sign-in this is: the browser names no person.
            answered = await self.agent.answer(state, "", finished)
        except AskError as exc:
            logger.info("a sign-in came back and could not be finished: %s", exc.message)
            return page("Not connected", exc.message, status=400)
        except Exception:
            logger.exception("finishing a sign-in failed")
            return page("Not connected", FAILED, status=500)
        signed = answered.signed_in
        assert signed is not None, "a finished sign-in says who signed in where"
        if signed.request_ids and self.resume is not None:
            try:
                self.resume(signed)
            except Exception:  # the sweep takes them up: the person is connected either way
                logger.exception("could not go on at once with the turns waiting for %s", signed.server)
        return page(
            f"Connected to {signed.server}",
            f"Connected to {signed.server} — you can go back to {self.back_to}.",
        )

    async def client_metadata(self, request: web.Request) -> web.Response:
        return web.json_response(
            client_metadata_document(self.public_url or ""), headers={"Cache-Control": "max-age=300"}
        )


_STYLE = "body{font:16px/1.5 system-ui,sans-serif;max-width:34em;margin:15vh auto;padding:0 1em}"


def page(title: str, text: str, *, status: int = 200) -> web.Response:
    """A small plain page for a person's browser; every word from outside is escaped."""
    title, text = html.escape(scrub(title)), html.escape(scrub(text))
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{_STYLE}</style>"
        f"</head><body><h1>{title}</h1><p>{text}</p></body></html>"
    )
    return web.Response(
        text=body, status=status, content_type="text/html", charset="utf-8", headers=_PRIVATE_PAGE
    )


def sign_in_endpoints(agent: Agent, public_url: str | None, back_to: str) -> SignInEndpoints | None:
    """The endpoints for a front end whose agent has per-person servers; None when it has none."""
    if getattr(agent, "connections", None) is None:
        return None
    return SignInEndpoints(agent, public_url=(public_url or "").rstrip("/"), back_to=back_to)
