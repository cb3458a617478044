"""Plain http reaches this machine only, unless an entry allows it, and never carries a credential.

A man in the middle is a listener that records every connection and every request, headers and
body. To reach it by a name that is not loopback, either the address guard's resolver maps
`mitm.example` to it (the guard is told to count 127.0.0.1 as public), or it is the HTTP proxy of
the environment, which is where anything on the path sits. Whatever nerve refuses must reach it not
at all: no connection, so no byte of a secret.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata

from adapters.settings import PLATFORMS
from bot.errors import ConfigError
from bot.mcp.address_guard import AddressGuard, IPAddress, PlainHttpRefused, http_client, resolve
from bot.mcp.auth.memory import MemoryTokens
from bot.mcp.auth.provider import NerveOAuth, auth_for
from bot.mcp.host import MCPHost
from bot.mcp.server_config import AuthConfig, ServerConfig
from bot.mcp.servers_file import load_mcp_config
from tests.test_doctor import doctor

LOOPBACK = ipaddress.ip_address("127.0.0.1")
SECRET = "Bearer SECRET-QvXrMzLpKtWb"
CLIENT_SECRET = "s3cret-GyUoIeAsDfPh"
MITM = "mitm.example"


async def mitm_resolves_here(host: str, port: int) -> list[IPAddress]:
    return [LOOPBACK] if host == MITM else await resolve(host, port)


# `mitm.example` reaches the listener; 127.0.0.1 counts as a public address, as in test_ssrf_guard.
GUARD = AddressGuard(resolver=mitm_resolves_here, trusted={LOOPBACK})


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    @property
    def raw(self) -> str:
        return f"{self.method} {self.target} {self.headers} {self.body.decode('latin-1')}"


@dataclass
class Listener:
    port: int
    connections: int = 0
    requests: list[Seen] = field(default_factory=list)

    def carrying(self, secret: str) -> list[Seen]:
        return [seen for seen in self.requests if secret in seen.raw]


Answer = Callable[[Seen], Awaitable[tuple[int, dict[str, str], bytes]]]


async def bad_gateway(seen: Seen) -> tuple[int, dict[str, str], bytes]:
    return 502, {}, b""


@asynccontextmanager
async def listening(answer: Answer = bad_gateway) -> AsyncIterator[Listener]:
    """An HTTP/1.1 listener on 127.0.0.1 that records every connection and request it gets."""
    found = Listener(port=0)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        found.connections += 1
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            method, target, _ = lines[0].split(" ", 2)
            seen = Seen(method, target, headers, body)
            found.requests.append(seen)
            status, extra, content = await answer(seen)
            out = [f"HTTP/1.1 {status} X", f"Content-Length: {len(content)}", "Connection: close"]
            out += [f"{name}: {value}" for name, value in extra.items()]
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + content)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    found.port = server.sockets[0].getsockname()[1]
    try:
        yield found
    finally:
        server.close()
        await server.wait_closed()


# --- the servers file ---------------------------------------------------------------------------------


def servers_file(tmp_path: Path, entry: dict[str, Any]) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"search": entry}}))
    return path


@pytest.mark.parametrize(
    "url", ["http://mcp.example.com/mcp", "http://10.0.0.5:8080/mcp", "HTTP://Search.Example/mcp", "${URL}"]
)
def test_plain_http_off_this_machine_is_refused_at_load_naming_the_server_and_what_to_do(tmp_path, url):
    path = servers_file(tmp_path, {"url": url, "headers": {"Authorization": "Bearer ${TOKEN}"}})
    with pytest.raises(ConfigError) as refused:
        load_mcp_config(path, {"TOKEN": "t", "URL": "http://mcp.example.com/mcp"}, platforms=PLATFORMS)
    message = refused.value.message
    assert message.startswith(f"{path}: server 'search' field 'url': plain http to ")
    assert "use https" in message and '"allowInsecureHttp": true' in message and "\n" not in message


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8765/mcp",
        "http://127.8.9.10/mcp",
        "http://localhost:8765/mcp",
        "http://[::1]:8765/mcp",
        "https://mcp.example.com/mcp",
    ],
)
def test_https_and_plain_http_on_loopback_load_with_the_flag_off(tmp_path, url):
    entry = {"url": url, "allowPrivateNetwork": True, "headers": {"Authorization": "Bearer t"}}
    for flag in ({}, {"allowInsecureHttp": False}):
        server = load_mcp_config(servers_file(tmp_path, {**entry, **flag}), platforms=PLATFORMS).servers[
            "search"
        ]
        assert server.url == url and server.allow_insecure_http is False


def test_allow_insecure_http_lets_the_entry_load(tmp_path):
    entry = {"url": "http://mcp.example.com/mcp", "allowInsecureHttp": True}
    server = load_mcp_config(servers_file(tmp_path, entry), platforms=PLATFORMS).servers["search"]
    assert server.allow_insecure_http and not ServerConfig(url="https://a.example/mcp").allow_insecure_http


# --- each request ---------------------------------------------------------------------------------------


async def test_plain_http_off_this_machine_is_not_even_connected_to_without_the_entry_allowing_it():
    """An entry built in code (or a redirect, or a discovery document) is held to the rule as well."""
    async with listening() as mitm, http_client(False, guard=GUARD, timeout=5) as client:
        with pytest.raises(PlainHttpRefused, match="use https, or set allowInsecureHttp if you mean it"):
            await client.get(f"http://{MITM}:{mitm.port}/mcp")
    assert mitm.connections == 0


async def test_allow_insecure_http_lets_a_request_without_credentials_through():
    client = http_client(False, guard=GUARD, allow_insecure_http=True, timeout=5)
    async with listening() as mitm, client:
        answer = await client.post(f"http://{MITM}:{mitm.port}/mcp", json={"jsonrpc": "2.0"})
    assert answer.status_code == 502 and [seen.target for seen in mitm.requests] == ["/mcp"]


async def test_a_bearer_header_never_crosses_plain_http_even_where_allowed(monkeypatch):
    """The issue's setup through nerve's own host: an entry at http:// with a bearer token, the man in
    the middle as the environment's proxy. Beside it an entry without headers shows he is on the path."""
    async with listening() as mitm:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{mitm.port}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        plain = {"url": f"http://{MITM}/mcp", "allowInsecureHttp": True, "allowPrivateNetwork": True}
        servers = {
            "secret": ServerConfig.model_validate({**plain, "headers": {"Authorization": SECRET}}),
            "open": ServerConfig.model_validate(plain),
        }
        async with asyncio.timeout(60), MCPHost(servers, connect_timeout=5) as host:
            await host.wait_for(lambda: "secret" in dict(host.problems()) and bool(mitm.requests))
            problem = dict(host.problems())["secret"]
    assert problem == (
        f"was not contacted: plain http to {MITM} would carry the Authorization header in the clear, "
        "which nerve never sends: serve it over https"
    )
    assert mitm.requests and {seen.target for seen in mitm.requests} == {f"http://{MITM}/mcp"}
    assert mitm.carrying("SECRET-") == []


async def test_a_configured_header_is_not_carried_over_a_redirect_to_plain_http():
    """httpx drops Authorization on a redirect to another host, but not the entry's other headers."""
    async with listening() as mitm:

        async def redirect(seen: Seen) -> tuple[int, dict[str, str], bytes]:
            return 302, {"Location": f"http://{MITM}:{mitm.port}/elsewhere"}, b""

        async with listening(redirect) as server:
            client = http_client(
                True,
                allow_insecure_http=True,
                headers={"X-Api-Key": SECRET},
                follow_redirects=True,
                timeout=5,
            )
            async with client:
                with pytest.raises(PlainHttpRefused, match="would carry header 'x-api-key' in the clear"):
                    # 127.0.0.1 is loopback: the first hop may carry it; the redirect may not.
                    await client.get(f"http://127.0.0.1:{server.port}/mcp")
    assert len(server.carrying("SECRET-")) == 1 and mitm.connections == 0


@pytest.mark.parametrize(
    ("allowed", "method"),
    [
        (False, "client_secret_basic"),
        (True, "client_secret_basic"),
        (True, "client_secret_post"),
    ],
    ids=["refused-http", "allowed-http-basic", "allowed-http-post"],
)
async def test_the_client_secret_never_goes_to_a_plain_http_token_endpoint(allowed, method):
    """The server's metadata sends the token request to plain http off this machine: without the
    entry allowing it the request is refused as plain http; with it, as carrying the client secret."""
    async with listening() as mitm:
        token_endpoint = f"http://{MITM}:{mitm.port}/token"
        issuer: list[str] = []

        async def protected(seen: Seen) -> tuple[int, dict[str, str], bytes]:
            path = seen.target.split("?")[0]
            if path == "/mcp":
                metadata = f"{issuer[0]}/.well-known/oauth-protected-resource/mcp"
                return 401, {"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'}, b""
            if path.startswith("/.well-known/oauth-protected-resource"):
                document = {"resource": f"{issuer[0]}/mcp", "authorization_servers": [issuer[0]]}
            elif path.startswith("/.well-known/oauth-authorization-server"):
                document = {
                    "issuer": issuer[0],
                    "authorization_endpoint": f"{issuer[0]}/authorize",
                    "token_endpoint": token_endpoint,
                    "response_types_supported": ["code"],
                    "grant_types_supported": ["client_credentials"],
                    "token_endpoint_auth_methods_supported": [method],
                }
            else:
                return 404, {}, b""
            return 200, {"Content-Type": "application/json"}, json.dumps(document).encode()

        async with listening(protected) as server:
            issuer.append(f"http://127.0.0.1:{server.port}")
            url = f"{issuer[0]}/mcp"
            auth = AuthConfig(
                type="client_credentials",
                client_id="nerve",
                client_secret=CLIENT_SECRET,
                token_endpoint_auth_method=method,  # type: ignore[arg-type]
            )
            provider = auth_for(url, auth, MemoryTokens(), redirect_uri="")
            client = http_client(False, guard=GUARD, allow_insecure_http=allowed, auth=provider, timeout=5)
            async with client:
                with pytest.raises(PlainHttpRefused) as refused:
                    await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert refused.value.host == MITM
    if allowed:
        carried = (
            "the Authorization header" if method == "client_secret_basic" else "'client_secret' in its body"
        )
        assert f"would carry {carried} in the clear" in str(refused.value)
    else:
        assert "use https, or set allowInsecureHttp" in str(refused.value)
    # The discovery did happen (so the token request was the next step), and nothing reached him.
    assert any("oauth-authorization-server" in seen.target for seen in server.requests)
    assert mitm.connections == 0


def test_a_sign_in_page_over_plain_http_is_never_shown():
    """A person types their password there: not in the clear, whatever the entry allows."""

    def provider(endpoint: str) -> NerveOAuth:
        config = AuthConfig(type="oauth", identity="user")
        found = NerveOAuth(
            "https://mcp.example/mcp", config, MemoryTokens(), redirect_uri="http://127.0.0.1:9/callback"
        )
        found.context.oauth_metadata = OAuthMetadata.model_validate(
            {"issuer": "https://as.example", "authorization_endpoint": endpoint, "token_endpoint": endpoint}
        )
        found.context.client_info = OAuthClientInformationFull(client_id="nerve", redirect_uris=None)
        return found

    with pytest.raises(PlainHttpRefused, match=f"its sign-in page is plain http to {MITM}"):
        provider(f"http://{MITM}/authorize").authorization_request()
    for fine in ("https://as.example/authorize", "http://127.0.0.1:9000/authorize"):
        assert provider(fine).authorization_request().url.startswith(fine + "?")


# --- nerve doctor -------------------------------------------------------------------------------------


async def test_doctor_warns_about_an_entry_allowing_plain_http_and_errs_on_one_that_does_not(tmp_path):
    # 192.0.2.10 (TEST-NET): an address the admin wrote is tried as written; nothing answers there.
    entry: dict[str, Any] = {"url": "http://192.0.2.10:9/mcp", "allowInsecureHttp": True}
    allowed = tmp_path / "allowed"
    refused = tmp_path / "refused"
    for folder in (allowed, refused):
        folder.mkdir()
    allowed_file = servers_file(allowed, entry)
    refused_file = servers_file(refused, {"url": entry["url"]})
    runs = await asyncio.gather(
        doctor(allowed, NERVE_MCP_CONFIG=str(allowed_file)),
        doctor(refused, NERVE_MCP_CONFIG=str(refused_file)),
    )
    warned = [line for line in runs[0].lines if line.startswith("warning") and "server search" in line]
    assert len(warned) == 1, f"exit {runs[0].code}\n{runs[0].out}\n{runs[0].err}"
    assert warned[0].endswith(
        "plain http to 192.0.2.10 (allowInsecureHttp): anything on the path can read and change its "
        "traffic; nerve sends it no headers or sign-in credentials → serve it over https and drop "
        "allowInsecureHttp"
    )
    error = [line for line in runs[1].lines if line.startswith("error") and "servers file" in line]
    assert len(error) == 1 and "server 'search' field 'url': plain http to 192.0.2.10" in error[0]
    assert runs[1].code != 0
