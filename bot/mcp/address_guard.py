"""Remote MCP servers are reached on public addresses only, unless the servers file says otherwise.

A server URL, its redirects and OAuth documents could lead inside nerve's network (cloud metadata at
169.254.169.254), so the pool's network backend resolves the host, refuses any answer that is not
globally routable, and connects to the very address it checked: DNS cannot change in between.
`PlainHttpCheck` refuses plain http off this machine unless allowed, and a credential over it always."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import urllib.request
from collections.abc import Awaitable, Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import anyio
import httpcore2
import httpx2
from httpcore2 import AnyIOBackend, AsyncNetworkStream

from bot.plain_http import is_loopback

if TYPE_CHECKING:
    from bot.mcp.server_config import ServerConfig

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]
# Addresses that carry an IPv4 address inside an IPv6 one (NAT64's well-known prefix).
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
HINT = "set allowPrivateNetwork if you mean it"
# What an address the admin wrote in a server URL may be: loopback or private, never link-local.
_WRITTEN_OK = frozenset({"on this machine (loopback)", "on a private network"})
# Fields of a form (or JSON) body that are credentials: OAuth client secrets and assertions, tokens,
# the authorization code and its PKCE verifier, a password grant's password.
SECRET_FIELDS = frozenset(
    {"client_secret", "client_assertion", "refresh_token", "access_token", "token", "code"}
    | {"code_verifier", "password"}
)


class Refused(httpx2.ConnectError):
    """nerve did not open this connection, on purpose: the message says why and what to do."""


class AddressRefused(Refused):
    """A remote server's host resolved to an address nerve does not reach without being told to."""

    def __init__(self, address: IPAddress, why: str) -> None:
        self.address = address
        super().__init__(f"its address {address} is {why}; {HINT}")


class PlainHttpRefused(Refused):
    """A request to a host that is not loopback over plain http, which nerve did not send."""

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        super().__init__(message)


class PlainHttpCheck:
    """A request event hook, so it sees each request (redirects too) after its auth, before it is sent."""

    def __init__(self, *, allow_insecure_http: bool = False, secret_headers: Iterable[str] = ()) -> None:
        self._allowed = allow_insecure_http
        self._secret_headers = {"authorization", *(name.lower() for name in secret_headers)}

    async def __call__(self, request: httpx2.Request) -> None:
        if request.url.scheme != "http" or is_loopback(request.url.host):
            return
        host = request.url.host
        if not self._allowed:
            raise PlainHttpRefused(
                host,
                f"plain http to {host} can be read and changed by anything on the path: use https, "
                "or set allowInsecureHttp if you mean it",
            )
        if (carried := self.credential(request)) is not None:
            raise PlainHttpRefused(
                host,
                f"plain http to {host} would carry {carried} in the clear, which nerve never sends: "
                "serve it over https",
            )

    def credential(self, request: httpx2.Request) -> str | None:
        """What secret `request` carries (a phrase), or None."""
        for name in request.headers:
            if name.lower() in self._secret_headers:
                return "the Authorization header" if name.lower() == "authorization" else f"header {name!r}"
        try:
            body = request.content
        except httpx2.RequestNotRead:
            return "a streamed body nerve cannot check"
        found = sorted(SECRET_FIELDS & _body_fields(body, request.headers.get("content-type", "")))
        return f"{found[0]!r} in its body" if found else None


def _body_fields(body: bytes, content_type: str) -> set[str]:
    """The field names of a form body, or the keys of a JSON object body (nothing for other bodies)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if body and kind == "application/x-www-form-urlencoded":
        return set(parse_qs(body.decode("latin-1"), keep_blank_values=True))
    found: Any = None
    if body and (kind == "application/json" or kind.endswith("+json")):
        with contextlib.suppress(ValueError):
            found = json.loads(body)
    return set(found) if isinstance(found, dict) else set()


def why_refused(address: IPAddress) -> str | None:
    """Why nerve does not connect to `address` unasked (a phrase), or None for a public address."""
    if (embedded := _embedded_ipv4(address)) is not None:
        return why_refused(embedded)
    if address.is_unspecified:
        return "unspecified (it reaches this machine)"
    if address.is_loopback:
        return "on this machine (loopback)"
    if address.is_link_local:
        return "link-local (where cloud metadata services answer)"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private or not address.is_global:
        return "on a private network"
    return None


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to, in the resolver's order (an address literal: itself)."""
    with contextlib.suppress(ValueError):
        return [ipaddress.ip_address(host.strip("[]"))]
    answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(str(a[4][0]).split("%", 1)[0]) for a in answers))


def written_origin(url: str | None) -> tuple[str, int] | None:
    """The (host, port) of a server URL whose host is a loopback or private literal, or `localhost`;
    None for names only DNS places and for link-local literals (cloud metadata is never a server)."""
    if not url:
        return None
    parsed = httpx2.URL(url)
    host = _normal(parsed.host)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    if is_loopback(host):
        return host, port
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    return (host, port) if why_refused(address) == "on a private network" else None


def _normal(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def _is_literal(host: str, address: IPAddress) -> bool:
    """Whether `host` is `address` itself, written as an address literal (not a name resolving to it)."""
    try:
        return ipaddress.ip_address(_normal(host)) == address
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True)
class AddressGuard:
    """Resolves a host and refuses it if any of its addresses is not public (or trusted). The
    `written` origin's addresses are allowed, a name (`localhost`) only while it is loopback."""

    resolver: Resolver = resolve
    # Addresses treated as public all the same: a narrow allowance (and what tests stand in with).
    trusted: Collection[IPAddress] = ()
    written: tuple[str, int] | None = None

    async def checked(self, host: str, port: int) -> list[IPAddress]:
        """The host's addresses, all allowed; raises `AddressRefused` naming the first that is not."""
        if not (addresses := await self.resolver(host, port)):
            raise httpx2.ConnectError(f"{host} did not resolve to any address")
        as_written = self.written is not None and (_normal(host), port) == self.written
        for address in addresses:
            if address in self.trusted:
                continue
            why = why_refused(address)
            if as_written and why in _WRITTEN_OK and (address.is_loopback or _is_literal(host, address)):
                continue
            if why is not None:
                raise AddressRefused(address, why)
        return addresses


class GuardedBackend(AnyIOBackend):
    """The connection pool's network: resolve, check, then connect to exactly the checked address."""

    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore2's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await self._guard.checked(host, port)
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(f"resolving {host} took over {timeout} s") from exc
        except OSError as exc:  # socket.gaierror: no such host
            raise httpcore2.ConnectError(f"{host} could not be resolved: {exc}") from exc
        failure: Exception | None = None
        for address in addresses:
            try:
                return await super().connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> AsyncNetworkStream:
        raise httpcore2.ConnectError("a remote MCP server is reached over TCP, not a local socket")


class GuardedTransport(httpx2.AsyncBaseTransport):
    """Direct connections checked at connect time; a proxied request's host checked before it goes."""

    def __init__(self, guard: AddressGuard) -> None:
        self._guard = guard
        # httpx2's own transport, its pool's network swapped for the guarded backend before any use.
        self._direct = httpx2.AsyncHTTPTransport()
        self._direct._pool._network_backend = GuardedBackend(guard)
        self._proxied: dict[str, httpx2.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if (proxy := _environment_proxy(request.url)) is None:
            return await self._direct.handle_async_request(request)
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        await self._guard.checked(request.url.host, port)
        if (transport := self._proxied.get(proxy)) is None:
            transport = self._proxied[proxy] = httpx2.AsyncHTTPTransport(proxy=proxy)
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        await self._direct.aclose()
        for transport in self._proxied.values():
            await transport.aclose()


def _environment_proxy(url: httpx2.URL) -> str | None:
    """The proxy HTTP(S)_PROXY / ALL_PROXY names for `url`, unless NO_PROXY exempts its host."""
    proxies = urllib.request.getproxies_environment()
    bypass: Callable[[str, dict[str, str]], bool] = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    if not proxies or bypass(url.host, proxies):
        return None
    return proxies.get(url.scheme) or proxies.get("all")


def http_client(
    allow_private_network: bool,
    guard: AddressGuard | None = None,
    *,
    allow_insecure_http: bool = False,
    server_url: str | None = None,
    **options: Any,
) -> httpx2.AsyncClient:
    """An HTTP client for one remote server under its entry's rules; its `headers` count as credentials."""
    check = PlainHttpCheck(
        allow_insecure_http=allow_insecure_http, secret_headers=httpx2.Headers(options.get("headers")).keys()
    )
    hooks = {kind: list(found) for kind, found in (options.pop("event_hooks", None) or {}).items()}
    hooks["request"] = [*hooks.get("request", []), check]  # last: it sees the request as sent
    options["event_hooks"] = hooks
    if allow_private_network:
        return httpx2.AsyncClient(**options)
    guard = replace(guard or AddressGuard(), written=written_origin(server_url))
    return httpx2.AsyncClient(transport=GuardedTransport(guard), **options)


def entry_client(config: ServerConfig, **options: Any) -> httpx2.AsyncClient:
    return http_client(
        config.allow_private_network,
        allow_insecure_http=config.allow_insecure_http,
        server_url=config.url,
        **options,
    )
