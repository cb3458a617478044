"""The runtime of `nerve chat` and `nerve ask`, with a loopback callback for sign-ins only when a
server signs in with OAuth: otherwise the OAuth client is not loaded."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from functools import partial
from typing import TYPE_CHECKING

from bot.config import Settings
from bot.runtime import Runtime, open_runtime, read_mcp_config

if TYPE_CHECKING:
    from adapters.terminal.sign_in import LoopbackCallback


@contextlib.asynccontextmanager
async def terminal_runtime(
    settings: Settings, *, servers_in_background: bool
) -> AsyncIterator[tuple[Runtime, LoopbackCallback | None]]:
    servers = read_mcp_config(settings.nerve_mcp_config, platforms=settings.platforms).servers
    opened = partial(open_runtime, settings, servers_in_background=servers_in_background)
    if not any(config.auth is not None and config.auth.type == "oauth" for config in servers.values()):
        async with opened() as runtime:
            yield runtime, None
        return
    from adapters.terminal.sign_in import LoopbackCallback

    async with LoopbackCallback() as callback, opened(sign_in_redirect=callback.redirect_uri) as runtime:
        if runtime.agent.connections is not None:
            callback.attach(runtime.agent)
        yield runtime, callback
