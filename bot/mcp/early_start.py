"""Stdio servers started before nerve loads its own libraries, so the two start-ups overlap.

A link claims its process only when it was started exactly as the link would start it; whatever no
link claims is stopped on the way out. POSIX only: on Windows servers start as before."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from anyio.abc import Process

from bot.mcp.server_config import ServerConfig
from bot.mcp.stderr import StderrTap

logger = logging.getLogger(__name__)

# What the SDK's stdio client passes down from nerve's own environment on POSIX
# (`mcp.client.stdio.DEFAULT_INHERITED_ENV_VARS`); checked again at claim time.
INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


@dataclass
class EarlyServer:
    """One server process started ahead of its link, with the pipe its stderr is written to."""

    config: ServerConfig
    env: dict[str, str]
    process: Process
    tap: StderrTap


_waiting: dict[str, EarlyServer] = {}


async def _start(name: str, config: ServerConfig) -> None:
    assert config.command is not None
    # The variables a stdio server gets from nerve, as the SDK chooses them (no shell functions).
    env = {
        key: value
        for key in INHERITED
        if (value := os.environ.get(key)) is not None and not value.startswith("()")
    } | config.env
    tap = StderrTap(name)
    try:
        process = await anyio.open_process(
            [config.command, *config.args], env=env, stderr=tap.writer, cwd=config.cwd, start_new_session=True
        )
    except (OSError, ValueError):
        # The link will try again and report why in its own words; nothing is lost by waiting.
        tap.close()
        return
    _waiting[name] = EarlyServer(config=config, env=env, process=process, tap=tap)


@asynccontextmanager
async def started_early(servers: Mapping[str, ServerConfig]) -> AsyncIterator[None]:
    """Start the stdio servers now; stop those no link claimed when the block ends."""
    if sys.platform != "win32":
        for name, config in servers.items():
            if config.kind == "stdio" and name not in _waiting:
                await _start(name, config)
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):  # each within about a second
            while _waiting:
                await _stop(*_waiting.popitem())


async def claim(name: str, config: ServerConfig, env: Mapping[str, str]) -> EarlyServer | None:
    """The early process of `name` if started exactly so and still running; else stopped, and None."""
    if (early := _waiting.pop(name, None)) is None:
        return None
    if early.config == config and early.env == dict(env) and early.process.returncode is None:
        return early
    await _stop(name, early)
    return None


async def _stop(name: str, early: EarlyServer) -> None:
    from bot.mcp.stdio import stop_server  # the SDK's stop, bounded; loaded only when needed

    logger.debug("MCP server %r: started early but not used; stopping it", name)
    try:
        await stop_server(early.process, name)
    finally:
        early.tap.close()
