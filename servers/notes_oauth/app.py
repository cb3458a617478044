"""Puts the notes server together and serves it on 127.0.0.1: one port, or two with --issuer-port.

The MCP port serves `/mcp` behind the gate and the protected resource metadata (RFC 9728); the
issuer (the same port unless --issuer-port is given) serves the authorization server. Ports are bound
before anything else, so `--port 0` works: the line `notes-oauth ready mcp=URL issuer=URL` on stdout
says where, once both ports accept connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import uvicorn
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import BaseRoute, Route

from servers.notes_oauth import scopes
from servers.notes_oauth.clients import ClientDirectory, load_trusted_document
from servers.notes_oauth.gate import McpAccessGate
from servers.notes_oauth.issuer import issuer_routes
from servers.notes_oauth.provider import NotesAuthorizationServer
from servers.notes_oauth.store import NotesStore
from servers.notes_oauth.tools import CallLog, build_notes_server

logger = logging.getLogger("servers.notes_oauth")

HOST = "127.0.0.1"
MCP_PATH = "/mcp"
ROOT_RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True)
class NotesOptions:
    """What the command line sets; see servers/README.md."""

    port: int
    issuer_port: int | None = None
    token_lifetime: int = 3600
    log_file: Path | None = None
    state_file: Path | None = None
    trusted_client_metadata: dict[str, Path] = field(default_factory=dict)
    allowed_redirect_uris: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotesApps:
    mcp_url: str
    issuer: str
    resource_app: Starlette
    issuer_app: Starlette | None  # None: the resource app serves the issuer's routes too


def build_apps(options: NotesOptions, mcp_port: int, issuer_port: int | None) -> NotesApps:
    mcp_url = f"http://{HOST}:{mcp_port}{MCP_PATH}"
    issuer = f"http://{HOST}:{issuer_port if issuer_port is not None else mcp_port}"
    store = NotesStore.open(options.state_file)
    trusted = {url: load_trusted_document(url, path) for url, path in options.trusted_client_metadata.items()}
    directory = ClientDirectory(store, trusted, options.allowed_redirect_uris)
    authorization = NotesAuthorizationServer(
        store, directory, issuer=issuer, resource=mcp_url, token_lifetime=options.token_lifetime
    )
    notes = build_notes_server(store, CallLog(options.log_file))
    mcp_routes = notes.streamable_http_app(host=HOST).routes
    resource_metadata_url = str(build_resource_metadata_url(AnyHttpUrl(mcp_url)))
    metadata = ProtectedResourceMetadataHandler(
        ProtectedResourceMetadata.model_validate(
            {
                "resource": mcp_url,
                "authorization_servers": [issuer],
                "scopes_supported": [scope for scope in scopes.SUPPORTED if scope != scopes.OFFLINE_ACCESS],
                "resource_name": "Notes",
            }
        )
    )
    routes: list[BaseRoute] = [
        Route(urlsplit(resource_metadata_url).path, metadata.handle, methods=["GET"]),
        Route(ROOT_RESOURCE_METADATA_PATH, metadata.handle, methods=["GET"]),
        *mcp_routes,
    ]
    if issuer_port is None:
        routes += issuer_routes(authorization)
    middleware = [
        # Checks the bearer token, including that it was issued for this server (RFC 8707).
        Middleware(
            AuthenticationMiddleware,
            backend=BearerAuthBackend(authorization, resource_server_url=AnyHttpUrl(mcp_url)),
        ),
        Middleware(AuthContextMiddleware),
        Middleware(McpAccessGate, path=MCP_PATH, resource_metadata_url=resource_metadata_url),
    ]
    resource_app = Starlette(
        routes=routes, middleware=middleware, lifespan=lambda _app: notes.session_manager.run()
    )
    issuer_app = Starlette(routes=issuer_routes(authorization)) if issuer_port is not None else None
    return NotesApps(mcp_url, issuer, resource_app, issuer_app)


class PortError(Exception):
    """A port the notes server was told to use cannot be bound."""


def bind(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise PortError(f"cannot listen on {HOST}:{port}: {exc.strerror}; pick another port") from exc
    return sock


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to `serve`, which stops both servers on one signal."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(options: NotesOptions) -> None:
    mcp_socket = bind(options.port)
    issuer_socket = bind(options.issuer_port) if options.issuer_port is not None else None
    apps = build_apps(
        options,
        mcp_socket.getsockname()[1],
        issuer_socket.getsockname()[1] if issuer_socket is not None else None,
    )
    servers = [(_server(apps.resource_app, lifespan="on"), mcp_socket)]
    if apps.issuer_app is not None and issuer_socket is not None:
        servers.append((_server(apps.issuer_app, lifespan="off"), issuer_socket))

    def stop() -> None:
        for server, _ in servers:
            server.should_exit = True

    loop = asyncio.get_running_loop()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signal_number, stop)
    try:
        async with asyncio.TaskGroup() as group:
            running = [group.create_task(server.serve([sock])) for server, sock in servers]
            while not all(server.started for server, _ in servers):
                if any(task.done() for task in running):
                    stop()
                    return
                await asyncio.sleep(0.02)
            print(f"notes-oauth ready mcp={apps.mcp_url} issuer={apps.issuer}", flush=True)
            logger.info("notes-oauth serving MCP at %s, signing in at %s", apps.mcp_url, apps.issuer)
            await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            stop()
    finally:
        for signal_number in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signal_number)


def _server(app: Starlette, *, lifespan: Literal["on", "off"]) -> _Server:
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan=lifespan,
        timeout_graceful_shutdown=2,
    )
    return _Server(config)
