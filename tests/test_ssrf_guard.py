"""Remote MCP servers on loopback, private or link-local addresses are refused unless allowed.

The guard checks the address a connection is opened to, after resolution, for every request of a
remote server's client: so a hostname that resolves inside (`localhost`), a redirect and an OAuth
discovery document that point inside are refused as well as a literal private URL. Listeners on
127.0.0.2 stand in for what lies inside the network: they must see no connection at all. Where a
test needs a server that counts as public, the guard is told to trust 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest

from bot.mcp.address_guard import (
    AddressGuard,
    AddressRefused,
    IPAddress,
    Refused,
    http_client,
    why_refused,
    written_origin,
)
from bot.mcp.auth.memory import MemoryTokens
from bot.mcp.auth.provider import auth_for
from bot.mcp.auth.sign_ins import SignIns
from bot.mcp.auth.vault import Vault
from bot.mcp.host import MCPHost
from bot.mcp.server_config import AuthConfig, ServerConfig
from bot.store.sqlite import SQLiteStore
from bot.types import CallContext
from tests.mcp_servers.fault_proxy import FaultProxy

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = ipaddress.ip_address("127.0.0.1")
# Stands in for a public server in tests that need one to reach: only this address is trusted.
PUBLIC_STAND_IN = AddressGuard(trusted={LOOPBACK})
CALLBACK = "https://nerve.example/oauth/callback"
LOOPBACK_REFUSED = (
    "its address 127.0.0.1 is on this machine (loopback); set allowPrivateNetwork if you mean it"
)


# --- which addresses ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "on this machine (loopback)"),
        ("127.8.9.10", "on this machine (loopback)"),
        ("::1", "on this machine (loopback)"),
        ("10.0.0.5", "on a private network"),
        ("172.16.3.4", "on a private network"),
        ("192.168.1.1", "on a private network"),
        ("100.64.0.1", "on a private network"),  # carrier-grade NAT
        ("fc00::1", "on a private network"),
        ("fd12:3456::1", "on a private network"),
        ("169.254.169.254", "link-local (where cloud metadata services answer)"),
        ("fe80::1", "link-local (where cloud metadata services answer)"),
        ("0.0.0.0", "unspecified (it reaches this machine)"),
        ("::", "unspecified (it reaches this machine)"),
        ("::ffff:10.0.0.5", "on a private network"),  # IPv4-mapped
        ("::ffff:169.254.169.254", "link-local (where cloud metadata services answer)"),
        ("64:ff9b::a00:5", "on a private network"),  # NAT64 of 10.0.0.5
        ("2002:a00:5::1", "on a private network"),  # 6to4 of 10.0.0.5
        ("224.0.0.1", "a multicast address"),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_which_addresses_are_refused(address, why):
    assert why_refused(ipaddress.ip_address(address)) == why


# --- a remote server entry ------------------------------------------------------------------------


def kit_entry(**kwargs: object) -> ServerConfig:
    return ServerConfig(
        command=sys.executable, args=["-m", "tests.mcp_servers.testkit"], cwd=str(ROOT), **kwargs
    )


@pytest.mark.parametrize(
    ("url", "address", "why"),
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            "169.254.169.254",
            "link-local (where cloud metadata services answer)",
        ),
        ("http://0.0.0.0:{port}/mcp", "0.0.0.0", "unspecified (it reaches this machine)"),
    ],
    ids=["metadata", "unspecified"],
)
async def test_a_remote_server_inside_the_network_is_refused_with_what_to_set(remote_kit, url, address, why):
    # Plain http off this machine is allowed here, so what stops it is the address (test_plain_http).
    notes = ServerConfig(url=url.format(port=remote_kit), allow_insecure_http=True)
    servers = {"notes": notes, "kit": kit_entry()}
    async with asyncio.timeout(60), MCPHost(servers) as host:
        await host.wait_for(lambda: not host.starting() and bool(host.list_tools()))
        expected = f"its address {address} is {why}; set allowPrivateNetwork if you mean it"
        assert dict(host.problems())["notes"] == f"was not contacted: {expected}"
        assert {spec.server for spec in host.list_tools()} == {"kit"}
        # The stdio server beside it is not affected.
        assert (await host.call_tool("echo", {"text": "stdio"})).structured == {"result": "stdio"}


@pytest.mark.parametrize("host_name", ["127.0.0.1", "localhost", "[::1]"])
async def test_a_loopback_address_the_admin_wrote_is_reached_without_allow_private_network(
    remote_kit, host_name
):
    """What the servers file names by its very address is what the admin meant to reach."""
    if host_name == "[::1]" and not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    entry = ServerConfig(url=f"http://{host_name}:{remote_kit}/mcp")
    async with asyncio.timeout(60), MCPHost({"notes": entry}) as host:
        if host_name == "[::1]":
            await host.wait_for(lambda: not host.starting())
            if host.problems():  # the test server listens on IPv4 only: refused is what must not be
                assert "allowPrivateNetwork" not in dict(host.problems())["notes"]
                return
        await host.wait_until_ready()
        assert (await host.call_tool("whoami", {})).structured == {"result": "remote"}


@pytest.mark.parametrize(
    ("url", "written"),
    [
        ("http://127.0.0.1:8000/mcp", ("127.0.0.1", 8000)),
        ("http://LOCALHOST:8000/mcp", ("localhost", 8000)),
        ("https://[::1]/mcp", ("::1", 443)),
        ("http://10.0.0.5/mcp", ("10.0.0.5", 80)),
        ("https://192.168.1.1:8443/mcp", ("192.168.1.1", 8443)),
        ("http://169.254.169.254/latest/meta-data/", None),
        ("http://0.0.0.0:8000/mcp", None),
        ("https://mcp.internal.example/mcp", None),
        ("https://8.8.8.8/mcp", None),
    ],
)
def test_which_written_origins_are_reached_as_written(url, written):
    assert written_origin(url) == written


async def test_only_the_written_origin_is_allowed_not_its_neighbours():
    """A written 10.0.0.5:8000 lets nerve reach exactly that; the port beside it, another private
    address and a name that resolves to it are still refused."""
    private = ipaddress.ip_address("10.0.0.5")

    async def inside(host: str, port: int) -> list[IPAddress]:
        return [private]

    guard = AddressGuard(resolver=inside, written=written_origin("http://10.0.0.5:8000/mcp"))
    assert await guard.checked("10.0.0.5", 8000) == [private]
    for host, port in (("10.0.0.5", 8001), ("10.0.0.6", 8000), ("mcp.internal.example", 8000)):
        with pytest.raises(AddressRefused, match="on a private network; set allowPrivateNetwork"):
            await guard.checked(host, port)
    # localhost is this machine by name: allowed only while it resolves to loopback.
    guard = AddressGuard(resolver=inside, written=written_origin("http://localhost:8000/mcp"))
    with pytest.raises(AddressRefused):
        await guard.checked("localhost", 8000)


def as_if_named_by_dns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers written as 127.0.0.1 or localhost stand for a hostname that DNS places on loopback:
    nerve reaches what the admin wrote by address, so here it is as if they had not."""
    monkeypatch.setattr("bot.mcp.address_guard.written_origin", lambda url: None)


async def test_a_call_to_a_server_refused_since_its_tools_were_listed_fails_at_once(remote_kit, monkeypatch):
    """Its tools stay listed while it is away; a call says why it cannot be made, without waiting."""
    as_if_named_by_dns(monkeypatch)
    async with FaultProxy(remote_kit) as proxy:
        # A call that waited for the server would wait its timeout, far past the test's 60 s.
        url = f"http://localhost:{proxy.port}/mcp"
        entry = ServerConfig(url=url, allow_private_network=True, timeout=600)
        async with asyncio.timeout(60), MCPHost({"notes": entry}) as host:
            await host.wait_until_ready()
            link = host._links["notes"]
            link.config = entry.model_copy(update={"allow_private_network": False})  # the entry changed
            proxy.arm("reset")
            assert (await host.call_tool("whoami", {})).error_kind == "unavailable"
            await host.wait_for(lambda: link.refused is not None)
            began = time.monotonic()
            result = await host.call_tool("whoami", {})
            took = time.monotonic() - began
    # Refused for its address (not "being restarted" after a wait), and at once: generous for a busy
    # machine, far short of the call's timeout.
    assert result.error_kind == "unavailable" and took < 30.0
    assert result.detail == LOOPBACK_REFUSED


@pytest.mark.parametrize("host_name", ["127.0.0.1", "localhost"])
async def test_allow_private_network_lets_nerve_reach_it(remote_kit, host_name):
    entry = ServerConfig(url=f"http://{host_name}:{remote_kit}/mcp", allow_private_network=True)
    async with asyncio.timeout(60), MCPHost({"notes": entry}) as host:
        await host.wait_until_ready()
        assert (await host.call_tool("whoami", {})).structured == {"result": "remote"}


# --- redirects, OAuth discovery, DNS answers ------------------------------------------------------------


Handler = Callable[[str], Awaitable[tuple[int, dict[str, str], bytes]]]


@asynccontextmanager
async def http_server(host: str, handle: Handler) -> AsyncIterator[tuple[int, list[str]]]:
    """A minimal HTTP/1.1 server: its port, and the paths of the requests it was sent."""
    paths: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            length = next(
                (int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")),
                0,
            )
            await reader.readexactly(length)
            path = lines[0].split(" ")[1]
            paths.append(path)
            status, headers, body = await handle(path)
            out = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", "Connection: close"]
            out += [f"{name}: {value}" for name, value in headers.items()]
            writer.write(("\r\n".join(out) + "\r\n\r\n").encode() + body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, host, 0)
    try:
        yield server.sockets[0].getsockname()[1], paths
    finally:
        server.close()
        await server.wait_closed()


async def inside(path: str) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, b'{"secret": "from inside"}'


@pytest.mark.parametrize("allow", [False, True], ids=["guarded", "allowed"])
async def test_a_redirect_into_the_network_is_refused(allow):
    async with http_server("127.0.0.2", inside) as (inner_port, reached):

        async def redirect(path: str) -> tuple[int, dict[str, str], bytes]:
            return 302, {"Location": f"http://127.0.0.2:{inner_port}/latest/meta-data/"}, b""

        async with http_server("127.0.0.1", redirect) as (outer_port, _):
            # The admin wrote the outer server's loopback address: that origin is reached, not others.
            written = f"http://127.0.0.1:{outer_port}/mcp"
            client = http_client(allow, server_url=written, follow_redirects=True, timeout=5)
            async with client:
                if allow:
                    answer = await client.get(f"http://127.0.0.1:{outer_port}/mcp")
                    assert answer.json() == {"secret": "from inside"}
                    assert reached == ["/latest/meta-data/"]
                    return
                with pytest.raises(AddressRefused) as refused:
                    await client.get(f"http://127.0.0.1:{outer_port}/mcp")
    assert str(refused.value.address) == "127.0.0.2" and reached == []


@pytest.mark.parametrize("allow", [False, True], ids=["guarded", "allowed"])
async def test_oauth_discovery_that_points_into_the_network_is_refused(allow):
    """The server's 401 names protected-resource metadata on an inside address; the sign-in's discovery
    requests go through the same client, so through the same check."""
    async with http_server("127.0.0.2", inside) as (inner_port, reached):
        metadata = f"http://127.0.0.2:{inner_port}/.well-known/oauth-protected-resource"

        async def challenge(path: str) -> tuple[int, dict[str, str], bytes]:
            if path == "/mcp":
                return 401, {"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'}, b""
            return 404, {}, b""

        async with http_server("127.0.0.1", challenge) as (outer_port, seen):
            url = f"http://127.0.0.1:{outer_port}/mcp"
            auth = AuthConfig(type="client_credentials", client_id="nerve", client_secret="s3cret")
            provider = auth_for(url, auth, MemoryTokens(), redirect_uri="")
            # The server's own address was written by the admin; its metadata's address was not.
            async with http_client(allow, server_url=url, auth=provider, timeout=5) as client:
                # The sign-in cannot finish either way: what matters is who was asked.
                with contextlib.suppress(Exception):
                    await client.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert seen[0] == "/mcp"
    if allow:
        assert reached == ["/.well-known/oauth-protected-resource"]
    else:
        assert reached == []


async def test_the_answer_is_checked_at_each_connect_not_once_per_name():
    """A name that first resolves to a public address and later inside (DNS rebinding) is refused
    on the connection that would go inside."""
    answers: list[list[IPAddress]] = [[LOOPBACK], [ipaddress.ip_address("10.0.0.5")]]

    async def rebinding(host: str, port: int) -> list[IPAddress]:
        return answers.pop(0) if len(answers) > 1 else answers[0]

    guard = AddressGuard(resolver=rebinding, trusted={LOOPBACK})

    async def hello(path: str) -> tuple[int, dict[str, str], bytes]:
        return 200, {}, b"hello"

    client = http_client(False, guard=guard, allow_insecure_http=True)
    async with http_server("127.0.0.1", hello) as (port, paths), client:
        first = await client.get(f"http://mcp.example.test:{port}/one")
        assert first.text == "hello"
        with pytest.raises(AddressRefused, match=r"its address 10\.0\.0\.5 is on a private network"):
            await client.get(f"http://mcp.example.test:{port}/two")  # the server closed: a new connection
    assert paths == ["/one"]


async def test_an_unresolvable_name_is_a_plain_connect_error():
    async with http_client(False, allow_insecure_http=True, timeout=5) as client:
        with pytest.raises(httpx2.ConnectError) as failed:
            await client.get("http://nerve-no-such-host.invalid/mcp")
    assert not isinstance(failed.value, Refused)


async def test_a_per_person_server_inside_the_network_is_refused_before_any_sign_in(tmp_path, monkeypatch):
    """A per-person server's first contact is the sign-in's discovery: refused there, plainly."""
    as_if_named_by_dns(monkeypatch)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        servers = {
            "notes": ServerConfig(
                url=f"http://127.0.0.1:{port}/mcp", auth=AuthConfig(type="oauth", identity="user")
            )
        }
        store = await SQLiteStore.open(tmp_path / "nerve.db")
        try:
            sign_ins = SignIns(servers, store, Vault("a-test-secret-key-long-enough"), redirect_uri=CALLBACK)
            async with asyncio.timeout(30), MCPHost(servers, sign_ins=sign_ins) as host:
                context = CallContext(tool="connect_notes", owner="u1", person="slack:T1:U1")
                result = await host.call_tool("connect_notes", {}, context)
        finally:
            await store.close()
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked
    assert result.error_kind == "unavailable" and result.needs_sign_in is None
    assert result.detail == LOOPBACK_REFUSED
