"""/readyz on a PostgreSQL store: the real store and pool against the real server, reached through a
TCP relay the test can cut, so PostgreSQL goes away (and comes back) as it does for a replica whose
database host fails."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from adapters.ops_http import DATABASE_TIMEOUT, OpsEndpoints, PlatformLink, always
from bot.seams import Inbox
from bot.store.postgres import POOL_WAIT_SECONDS, PostgresStore
from tests.stores import PostgresBackend, postgres_backend

PASSWORD = "PgRelayXyQwErTy"


class Relay:
    """A TCP relay on 127.0.0.1 to the test server; `cut()` drops every connection and refuses new ones."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        # Counts the cuts: a connection accepted before a cut is cut, however far it got.
        self._cuts = 0
        # Open from `start` (set before it listens: a connection may come before it returns) to `cut`.
        self._open = False
        self.port = 0

    async def start(self) -> None:
        self._open = True
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def cut(self) -> None:
        assert self._server is not None
        self._open = False
        self._cuts += 1
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._open:
            writer.transport.abort()  # accepted just before a cut, served only after it
            return
        # Known from its accept: a connection still reaching upstream when `cut` comes is cut too.
        self._writers.add(writer)
        cuts = self._cuts
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            self._writers.discard(writer)
            writer.transport.abort()
            return
        if self._cuts != cuts or not self._open or writer.transport.is_closing():
            self._writers.discard(writer)
            writer.transport.abort()
            up_writer.transport.abort()
            return
        self._writers.add(up_writer)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}


def through(backend: PostgresBackend, relay: Relay) -> str:
    """The backend's URL, pointed at the relay, with a password (the server trusts the test user)."""
    parts = urlsplit(backend.location)
    user = parts.username or "postgres"
    return urlunsplit(parts._replace(netloc=f"{user}:{PASSWORD}@127.0.0.1:{relay.port}"))


class Agent:
    """What the endpoints read from an agent: its inbox (the store) and one ready MCP server."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    def server_states(self) -> dict[str, bool]:
        return {"env-query": True}


@contextlib.asynccontextmanager
async def endpoints(store: PostgresStore) -> AsyncIterator[str]:
    platform = PlatformLink("the terminal")
    platform.connected(always)
    async with OpsEndpoints(Agent(store), platform).serving("127.0.0.1", 0) as base:
        assert base is not None
        yield base


async def readiness(base: str) -> tuple[int, list[str]]:
    async with aiohttp.ClientSession() as session, session.get(f"{base}/readyz") as response:
        return response.status, (await response.json())["reasons"]


async def test_readyz_is_503_database_unreachable_while_postgresql_is_away_and_200_once_back() -> None:
    async with postgres_backend() as backend:
        target = urlsplit(backend.location)
        relay = Relay(target.hostname or "127.0.0.1", target.port or 5432)
        await relay.start()
        store = await PostgresStore.open(through(backend, relay))
        try:
            async with endpoints(store) as base:
                assert await readiness(base) == (200, [])

                await relay.cut()
                started = asyncio.get_running_loop().time()
                status, reasons = await readiness(base)
                waited = asyncio.get_running_loop().time() - started
                assert status == 503
                [reason] = reasons
                assert reason.startswith("database unreachable"), reason
                assert PASSWORD not in reason
                # Bounded by the probe's short timeout, not the pool's wait for a connection:
                # generous, so a busy machine passes, and still half the pool's wait.
                assert DATABASE_TIMEOUT < 3.5
                assert waited < POOL_WAIT_SECONDS / 2, "the probe is bounded by its short timeout"

                await relay.start()  # PostgreSQL is back, on the same address

                # The pool reconnects in the background, with backoff.
                for _ in range(100):
                    if await readiness(base) == (200, []):
                        break
                    await asyncio.sleep(0.2)
                else:
                    raise AssertionError("/readyz did not recover once PostgreSQL was back")
        finally:
            with contextlib.suppress(Exception):
                await relay.cut()
            await store.close()


async def test_readyz_of_a_closed_postgresql_store_says_database_unreachable() -> None:
    async with postgres_backend() as backend:
        store = await PostgresStore.open(backend.location)
        async with endpoints(store) as base:
            assert await readiness(base) == (200, [])
            await store.close()
            status, reasons = await readiness(base)
            assert status == 503
            assert [r.split(":")[0] for r in reasons] == ["database unreachable"]
