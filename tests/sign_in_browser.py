"""A person at a browser, for tests: `python -m tests.sign_in_browser USER URL` (set as BROWSER).

`webbrowser` runs the BROWSER command with the sign-in link. This signs in on the notes server's page
as USER, then follows the redirect back to nerve's callback, as a browser would, and prints what the
callback page said. Exit code 0 when that page answered 200.
"""

from __future__ import annotations

import asyncio
import sys

import httpx2

from servers.notes_oauth.sign_in import sign_in_as


async def sign_in(user: str, url: str) -> int:
    location = await sign_in_as(url, user)
    async with httpx2.AsyncClient(timeout=15.0) as http:
        page = await http.get(location)
    print(f"browser: {page.status_code} {page.text[:300]}", file=sys.stderr)
    return 0 if page.status_code == 200 else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: python -m tests.sign_in_browser USER URL", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(sign_in(sys.argv[1], sys.argv[2])))
