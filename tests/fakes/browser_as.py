"""A browser for `BROWSER=…`: signs in to the notes server's page as a given person, then follows
the redirect back to whoever asked (nerve's loopback callback).

    BROWSER="python -m tests.fakes.browser_as alice %s"
"""

from __future__ import annotations

import asyncio
import sys

import httpx2

from servers.notes_oauth.sign_in import sign_in_as


async def main(user: str, url: str) -> int:
    location = await sign_in_as(url, user)
    async with httpx2.AsyncClient(timeout=15) as http:
        landed = await http.get(location)
    return 0 if landed.status_code < 400 else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
