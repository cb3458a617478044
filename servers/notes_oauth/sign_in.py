"""Plays the person at the browser for tests: opens the sign-in page, types a name, presses Allow.

    location = await sign_in_as(authorize_url, "alice")   # the redirect back to the client

Only the notes server's own page is understood (one form, hidden inputs, a `user` field). Nothing is
followed past the page: the return value is the `Location` the server redirects to, carrying `code`,
`state` and `iss`, or `error` when the server refused the request.
"""

from __future__ import annotations

from html.parser import HTMLParser
from urllib.parse import urljoin

import httpx2

TIMEOUT_SECONDS = 15.0


class SignInError(Exception):
    """The sign-in page did not answer as expected (no page, no form, or no redirect after it)."""


class _SignInForm(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.hidden: dict[str, str] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "form" and self.action is None:
            self.action = found.get("action", "")
        elif tag == "input" and found.get("type") == "hidden" and "name" in found:
            self.hidden[found["name"]] = found.get("value", "")


async def sign_in_as(authorize_url: str, user: str, *, allow: bool = True) -> str:
    """Sign in to the page at `authorize_url` as `user` and return where the server redirects.

    With `allow=False` the person presses Deny instead, and the redirect carries `access_denied`.
    """
    async with httpx2.AsyncClient(follow_redirects=False, timeout=TIMEOUT_SECONDS) as http:
        page = await http.get(authorize_url)
        if page.is_redirect:
            return _location(page)  # refused before any page: the error goes back to the client
        if page.status_code != 200:
            raise SignInError(f"the sign-in page answered {page.status_code}: {_text_of(page.text)}")
        form = _SignInForm()
        form.feed(page.text)
        if form.action is None:
            raise SignInError("the sign-in page has no form")
        fields = {**form.hidden, "user": user, "decision": "allow" if allow else "deny"}
        answer = await http.post(urljoin(str(page.url), form.action), data=fields)
        if not answer.is_redirect:
            raise SignInError(
                f"signing in as {user!r} answered {answer.status_code}: {_text_of(answer.text)}"
            )
        return _location(answer)


def _location(response: httpx2.Response) -> str:
    location = response.headers.get("location")
    if not location:
        raise SignInError(f"a {response.status_code} redirect without a Location header")
    return location


def _text_of(page: str) -> str:
    """The readable words of an HTML answer, short enough for an error message."""
    parts: list[str] = []

    class _Text(HTMLParser):
        def handle_data(self, data: str) -> None:
            if data.strip():
                parts.append(data.strip())

    _Text().feed(page)
    return " ".join(parts)[:300]
