"""Plain http reaches this machine only, unless a server entry says otherwise, and never carries a secret.

Anything on the path of a plain http connection (a Wi-Fi access point, a proxy, a router) can read
and change what goes over it: a bearer token in `Authorization`, an OAuth client secret, a refresh
token. So a remote server's URL and the OAuth endpoints it leads to are https, except on loopback
(127.0.0.0/8, ::1, `localhost`: local development servers), or where the server entry says
`"allowInsecureHttp": true`; and even then a request that carries a credential is refused before it
is sent (`bot.mcp.address_guard.PlainHttpCheck`).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

LOOPBACK_NAMES = frozenset({"localhost"})


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine by its very name: 127.0.0.0/8, ::1 or `localhost`."""
    name = host.strip("[]").rstrip(".").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def plain_http_host(url: str) -> str | None:
    """The host `url` reaches over plain http off this machine; None for https, or for loopback."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() != "http" or not parts.hostname:
        return None
    return None if is_loopback(parts.hostname) else parts.hostname
