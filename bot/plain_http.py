"""Plain http reaches this machine only, unless a server entry says otherwise, and never carries a secret.

Anything on a plain http path can read and change it (a bearer token, a client secret), so remote
URLs and OAuth endpoints are https except on loopback or where the entry sets `"allowInsecureHttp"`,
and even then a request carrying a credential is refused (`bot.mcp.address_guard.PlainHttpCheck`).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    """Whether `host` is this machine by its very name: 127.0.0.0/8, ::1 or `localhost`."""
    name = host.strip("[]").rstrip(".").lower()
    if name == "localhost":
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
