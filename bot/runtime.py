"""Assembling the parts from Settings: store, MCP host, model, agent. Opened once, closed once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from bot.agent import DEFAULT_SYSTEM_PROMPT, Agent, AgentConfig
from bot.asks.connections import Connections
from bot.budgets.rules import parse_budgets, parse_prices
from bot.config import OFFLINE_MODEL, Settings
from bot.errors import ConfigError
from bot.files.intake import MB, FileRules
from bot.installs import workspace_installs
from bot.mcp.auth import loopback as _loopback
from bot.mcp.auth.people import person_of as person_of
from bot.mcp.host import MCPHost
from bot.mcp.link import AuthFactory
from bot.mcp.server_config import McpConfig, ServerConfig
from bot.mcp.servers_file import load_mcp_config as load_mcp_config
from bot.mcp.servers_file import read_mcp_config as read_mcp_config
from bot.model.chain import ModelChain, clients_of
from bot.model.concurrency import ConcurrencyLimits
from bot.model.models import ModelList, check_place_models, configured_models
from bot.model.offline import OfflineModel
from bot.policy.scopes import Place, Scopes
from bot.seams import LLM
from bot.store.base import ConversationStore
from bot.store.choose import open_configured_store
from bot.store.prune import pruning_inbox

if TYPE_CHECKING:  # the OAuth client is loaded only when a server signs in (below)
    import httpx2

    from bot.mcp.auth.sign_ins import SignIns

# Where a browser lands after signing in, and nerve's client metadata document (CIMD), under
# NERVE_PUBLIC_URL; the front ends serve both on the HTTP port.
CALLBACK_PATH = "/oauth/callback"
# The terminal's sign-in page listens on this path of its loopback server. Named here, with
# `person_of`, `load_mcp_config` and `read_mcp_config` imported above "as" themselves, so a front end
# that assembles a core reaches it through this module and not through `bot.mcp`.
LOOPBACK_CALLBACK = _loopback.CALLBACK
# Whose sign-in a server with `"identity": "bot"` (or client credentials) uses: nerve's own.
BOT_PERSON = "nerve"
CLIENT_METADATA_PATH = "/oauth/client.json"


@dataclass(frozen=True, slots=True, kw_only=True)
class Runtime:
    """Everything a front end needs: the agent, plus the parts it may report on."""

    agent: Agent
    host: MCPHost
    store: ConversationStore
    settings: Settings
    model_name: str
    # The servers file's policy, for front ends that show what a place is offered.
    scopes: Scopes = field(default_factory=Scopes)
    # The configured models, primary first; None: the offline model answers.
    models: ModelList | None = None
    # The MCP servers' first attempts, when they run in the background (`open_runtime`).
    servers_starting: asyncio.Task[None] | None = None

    @property
    def servers_started(self) -> bool:
        return self.servers_starting is None or self.servers_starting.done()

    async def wait_for_servers(self) -> None:
        """Wait until each MCP server has made its first attempt, as `MCPHost.start` does (a hanging
        one is given up on after its limit); at once when that was done before opening."""
        if self.servers_starting is not None:
            await asyncio.shield(self.servers_starting)

    @property
    def offline(self) -> bool:
        return self.models is None

    def model_for(self, place: Place) -> str:
        """The model a place's turns ask first: its own in the policy, else the primary."""
        return self.scopes.model_for(place) or self.model_name


T = TypeVar("T")


def agent_config(
    settings: Settings, mcp: McpConfig | None = None, models: ModelList | None = None
) -> AgentConfig:
    prices = _read(parse_prices, settings.nerve_prices)
    budgets = _read(parse_budgets, settings.nerve_budgets)
    if budgets.in_money and not prices.by_model:
        raise ConfigError("NERVE_BUDGETS sets limits in money, but NERVE_PRICES prices no model")
    # Usage is recorded under the name of the model that answered (a fallback's, a place's own):
    # one without a price would cost nothing against a money limit.
    unpriced = [name for name in models.names if name not in prices.by_model] if models else []
    if budgets.in_money and unpriced:
        raise ConfigError(
            f"NERVE_BUDGETS sets limits in money, but NERVE_PRICES has no price for {', '.join(unpriced)}"
            f" (prices are keyed by each model's name in {models.source if models else 'NERVE_MODELS'})"
        )
    return AgentConfig(
        max_rounds=settings.nerve_max_rounds,
        context_tokens=settings.nerve_context_tokens,
        system_prompt=settings.nerve_system_prompt or DEFAULT_SYSTEM_PROMPT,
        max_question_chars=settings.nerve_max_question_chars,
        max_concurrent_turns=settings.nerve_max_concurrent_turns,
        turn_queue=settings.nerve_turn_queue,
        scopes=mcp.scopes if mcp is not None else Scopes(),
        admins=settings.admins,
        approval_timeout=settings.nerve_approval_timeout,
        input_timeout=settings.nerve_input_timeout,
        sign_in_timeout=settings.nerve_sign_in_timeout,
        turn_deadline=settings.nerve_turn_deadline,
        platforms=settings.platforms,
        memory_share=settings.nerve_memory_share,
        schedules_per_person=settings.nerve_schedules_per_person,
        schedule_grace=settings.nerve_schedule_grace,
        files=FileRules(
            max_file_bytes=int(settings.nerve_max_file_mb * MB),
            max_files=settings.nerve_max_files,
            max_turn_bytes=int(settings.nerve_max_turn_files_mb * MB),
        ),
        vision=settings.nerve_vision,
        model=settings.nerve_model,
        prices=prices,
        budgets=budgets,
        budget_zone=settings.nerve_budget_timezone,
        currency=settings.nerve_currency,
    )


def _read(parse: Callable[[str], T], text: str) -> T:
    """A JSON setting read once at start-up; a mistake names the setting and the field."""
    try:
        return parse(text)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[ConversationStore]:
    """Only the conversation store: for reading history, which needs no servers and no model."""
    store = await open_configured_store(settings)
    try:
        yield store
    finally:
        await store.close()


def sign_ins_for(
    settings: Settings,
    servers: Mapping[str, ServerConfig],
    store: ConversationStore,
    redirect_uri: str | None,
) -> SignIns | None:
    """Per-person sign-in, when a server needs it; refused plainly when its settings are missing."""
    signed = sorted(name for name, config in servers.items() if config.auth and config.auth.type == "oauth")
    if not signed:
        return None
    names = ", ".join(signed)
    if settings.nerve_secret_key is None:
        raise ConfigError(
            f"{names} use OAuth sign-in, whose tokens are stored encrypted: set NERVE_SECRET_KEY"
            " (`nerve secret-key` prints a new one)"
        )
    public = (settings.nerve_public_url or "").rstrip("/")
    if redirect_uri is None:
        if not public:
            raise ConfigError(
                f"{names} use OAuth sign-in: set NERVE_PUBLIC_URL to the address people's browsers reach"
                " this nerve at (sign-in lands on NERVE_PUBLIC_URL/oauth/callback)"
            )
        redirect_uri = f"{public}{CALLBACK_PATH}"
    metadata_url = f"{public}{CLIENT_METADATA_PATH}" if public.startswith("https://") else None
    from bot.mcp.auth.sign_ins import SignIns
    from bot.mcp.auth.vault import Vault

    return SignIns(
        servers,
        store,
        Vault(settings.nerve_secret_key.get_secret_value()),
        redirect_uri=redirect_uri,
        client_metadata_url=metadata_url,
        timeout=settings.nerve_sign_in_timeout,
    )


def shared_auth(sign_ins: SignIns | None) -> AuthFactory:
    """How a server's one shared connection signs in: nerve's own client credentials, or the account
    an admin connected (`nerve connect`) for a server whose identity is the bot's."""

    def auth(name: str, config: ServerConfig) -> httpx2.Auth | None:
        if config.auth is None or config.url is None:
            return None
        if config.auth.type == "client_credentials":
            from bot.mcp.auth.memory import MemoryTokens
            from bot.mcp.auth.provider import auth_for

            storage = sign_ins.storage(name, BOT_PERSON) if sign_ins is not None else MemoryTokens()
            return auth_for(config.url, config.auth, storage, redirect_uri="")
        return sign_ins.provider(name, BOT_PERSON) if sign_ins is not None else None

    return auth


@asynccontextmanager
async def open_runtime(
    settings: Settings, *, sign_in_redirect: str | None = None, servers_in_background: bool = False
) -> AsyncIterator[Runtime]:
    """Open the store, start every MCP server, pick the model; close all of it on the way out.

    `sign_in_redirect` is where browsers come back after signing in to a per-person server when
    this front end serves its own callback (the terminal's loopback); else NERVE_PUBLIC_URL's.
    `servers_in_background` opens without waiting for the servers' first attempts (the chat greets
    the person meanwhile); its turns wait for them with `Runtime.wait_for_servers`."""
    mcp = load_mcp_config(settings.nerve_mcp_config, platforms=settings.platforms)
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(open_store(settings))
        await stack.enter_async_context(
            pruning_inbox(
                store,
                retention_hours=settings.nerve_inbox_retention_hours,
                conversation_retention_days=settings.nerve_retention_days,
                memory_retention=settings.nerve_memory_retention,
            )
        )
        sign_ins = sign_ins_for(settings, mcp.servers, store, sign_in_redirect)
        host = MCPHost(
            mcp.servers,
            default_timeout=settings.nerve_tool_timeout,
            max_call_seconds=settings.nerve_tool_max_seconds,
            sign_ins=sign_ins,
            auth=shared_auth(sign_ins),
        )
        stack.push_async_callback(host.aclose)
        starting: asyncio.Task[None] | None = None
        if servers_in_background:
            starting = asyncio.create_task(host.start(), name="mcp-servers-starting")
            stack.push_async_callback(_stop_starting, starting)
        else:
            await host.start()
        models = configured_models(settings, mcp.models, file_name=str(settings.nerve_mcp_config))
        check_place_models(models, mcp.scopes.models)
        llm: LLM
        # One limit per model on turns at once, learnt from the clients' requests and kept by the gate
        # (the offline model answers at once: it keeps the configured number).
        limits: ConcurrencyLimits | None = None
        if models is None:
            llm, model_name = OfflineModel(), OFFLINE_MODEL
        else:
            limits = ConcurrencyLimits(ceiling=settings.nerve_max_concurrent_turns)
            clients = clients_of(models, settings, limits=limits)
            for client in clients:
                stack.push_async_callback(client.aclose)
            llm = ModelChain.of(
                [(client.name, client) for client in clients], cool_down=settings.nerve_model_cool_down
            )
            model_name = models.primary.name
        config = agent_config(settings, mcp, models)
        if models is not None:
            # A refusal of images is remembered under the primary's name (`NERVE_MODEL` for one model).
            config = replace(config, model=models.primary.name)
        secret_key = settings.nerve_secret_key.get_secret_value() if settings.nerve_secret_key else None
        agent = Agent(
            limits=limits,
            llm=llm,
            host=host,
            store=store,
            inbox=store,
            config=config,
            turn_lock=store.turn_lock,
            approvals=store,
            inputs=store,
            memories=store,
            schedules=store,
            connections=Connections(sign_ins, host, settings.platforms) if sign_ins is not None else None,
            installs=workspace_installs(store, secret_key),
        )
        yield Runtime(
            agent=agent,
            host=host,
            store=store,
            settings=settings,
            model_name=model_name,
            scopes=mcp.scopes,
            models=models,
            servers_starting=starting,
        )


async def _stop_starting(starting: asyncio.Task[None]) -> None:
    """Leaving while the servers still make their first attempts: stop waiting for them (the host
    then closes what did start)."""
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await starting
