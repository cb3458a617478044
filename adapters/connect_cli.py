"""`nerve connect <server>`: sign in to a server from this machine, in the browser, now.

The account of a bot-identity server, or the terminal's person's for a per-person server; the tokens
are sealed into the store, where a running bot finds them.
"""

from __future__ import annotations

import logging
import sys

from adapters.terminal.views import conversation_key
from bot.config import Settings
from bot.errors import ConfigError
from bot.mcp.auth.loopback import LoopbackSignIn
from bot.mcp.auth.people import person_of
from bot.mcp.auth.provider import NerveOAuth
from bot.mcp.auth.sign_ins import HTTP_TIMEOUT
from bot.mcp.auth.tokens import StoredTokens
from bot.mcp.auth.vault import Vault
from bot.mcp.host import MCPHost
from bot.mcp.server_config import ServerConfig
from bot.mcp.servers_file import load_mcp_config
from bot.runtime import BOT_PERSON, open_store


async def connect(settings: Settings, server: str, thread: str = "default") -> int:
    servers = load_mcp_config(settings.nerve_mcp_config, platforms=settings.platforms).servers
    config = servers.get(server)
    if config is None or config.auth is None or config.auth.type != "oauth" or config.url is None:
        signed = ", ".join(n for n, c in servers.items() if c.auth and c.auth.type == "oauth") or "none"
        raise ConfigError(f"{server!r} is not a server nerve signs in to with OAuth (those: {signed})")
    if settings.nerve_secret_key is None:
        raise ConfigError("set NERVE_SECRET_KEY first: sign-in tokens are stored encrypted with it")
    key = conversation_key(thread)
    person = person_of(key, key.workspace, settings.platforms) if config.auth.per_person else BOT_PERSON
    vault = Vault(settings.nerve_secret_key.get_secret_value())
    async with open_store(settings) as store, LoopbackSignIn() as browser:
        storage = StoredTokens(store, vault, server=server, person=person, registration=browser.redirect_uri)
        # Access a question asked for and the stored sign-in lacked: this sign-in asks for it too.
        wanted = await storage.wanted_scope()
        # A fresh sign-in: whatever was stored before for this identity is replaced.
        await storage.forget()
        provider = NerveOAuth(
            config.url,
            config.auth,
            storage,
            redirect_uri=browser.redirect_uri,
            redirect_handler=browser.redirect_handler,
            callback_handler=browser.callback_handler,
            also_scope=wanted,
        )
        problem = await first_exchange(server, config, provider)
        if problem is None and await storage.get_tokens() is None:
            problem = "it let nerve in without signing in: no sign-in is needed"
    if problem is not None:
        print(f"nerve: could not connect {server}: {problem}", file=sys.stderr)
        return 1
    whose = "nerve's own account" if person == BOT_PERSON else "your account"
    print(f"Connected {server} ({whose}).")
    return 0


async def first_exchange(name: str, config: ServerConfig, provider: NerveOAuth) -> str | None:
    """Connect as a question does, so a sign-in asked only later (or a step-up) happens; None if connected."""
    # The reason is printed once, as one line: the connection's own warnings would repeat it.
    logging.getLogger("bot.mcp").setLevel(logging.ERROR)
    async with MCPHost({name: config}, connect_timeout=HTTP_TIMEOUT, auth=lambda _n, _c: provider) as host:
        # The first attempt ends connected or with its reason; a sign-in in the browser is part of it.
        await host.wait_for(lambda: not host.starting())
        if host.server_states().get(name):
            return None
        reasons = dict(host.problems())
    if provider.last_failure is not None and not reasons.get(name, "").startswith("was not contacted"):
        return str(provider.last_failure)
    return reasons.get(name, "the server could not be reached")
