"""`nerve connect <server>`: sign in to a server from this machine, in the browser, now.

For a server whose identity is the bot's (`"identity": "bot"`), this is how an admin connects the one
account everyone's calls use; for a per-person server it connects the person at this terminal. The
browser comes back to a loopback port (RFC 8252), the tokens are sealed into the store the bot uses,
and a running bot picks them up at its next attempt (a shared connection keeps trying until then).
"""

from __future__ import annotations

import sys

from adapters.terminal.views import conversation_key
from bot.config import Settings, load_mcp_config
from bot.errors import ConfigError
from bot.mcp.address_guard import http_client
from bot.oauth.loopback import LoopbackSignIn
from bot.oauth.people import person_of
from bot.oauth.provider import NerveOAuth
from bot.oauth.sign_ins import HTTP_TIMEOUT, PROBE, PROBE_HEADERS
from bot.oauth.tokens import StoredTokens
from bot.oauth.vault import Vault
from bot.runtime import BOT_PERSON, open_store


async def connect(settings: Settings, server: str, thread: str = "default") -> int:
    servers = load_mcp_config(settings.nerve_mcp_config).servers
    config = servers.get(server)
    if config is None or config.auth is None or config.auth.type != "oauth" or config.url is None:
        signed = ", ".join(n for n, c in servers.items() if c.auth and c.auth.type == "oauth") or "none"
        raise ConfigError(f"{server!r} is not a server nerve signs in to with OAuth (those: {signed})")
    if settings.nerve_secret_key is None:
        raise ConfigError("set NERVE_SECRET_KEY first: sign-in tokens are stored encrypted with it")
    key = conversation_key(thread)
    person = person_of(key, key.workspace) if config.auth.per_person else BOT_PERSON
    vault = Vault(settings.nerve_secret_key.get_secret_value())
    async with open_store(settings) as store, LoopbackSignIn() as browser:
        storage = StoredTokens(store, vault, server=server, person=person, registration=browser.redirect_uri)
        # A fresh sign-in: whatever was stored before for this identity is replaced.
        await storage.forget()
        provider = NerveOAuth(
            config.url,
            config.auth,
            storage,
            redirect_uri=browser.redirect_uri,
            redirect_handler=browser.redirect_handler,
            callback_handler=browser.callback_handler,
        )
        async with http_client(
            config.allow_private_network,
            allow_insecure_http=config.allow_insecure_http,
            auth=provider,
            timeout=HTTP_TIMEOUT,
        ) as http:
            answer = await http.post(config.url, json=PROBE, headers=PROBE_HEADERS)
        if await storage.get_tokens() is None or answer.status_code in (401, 403):
            why = provider.last_failure or f"the server answered {answer.status_code}"
            print(f"Could not connect {server}: {why}", file=sys.stderr)
            return 1
    whose = "nerve's own account" if person == BOT_PERSON else "your account"
    print(f"Connected {server} ({whose}).")
    return 0
