"""Assembling the parts from Settings: store, MCP host, model, agent. Opened once, closed once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

from bot.agent import DEFAULT_SYSTEM_PROMPT, Agent, AgentConfig
from bot.calls import CallSettings
from bot.config import McpConfig, Settings, load_mcp_config
from bot.mcp.host import MCPHost
from bot.model.offline import OfflineModel
from bot.policy.scopes import Scopes
from bot.seams import LLM
from bot.store.prune import pruning_inbox
from bot.store.sqlite import SQLiteStore


@dataclass(frozen=True, slots=True, kw_only=True)
class Runtime:
    """Everything a front end needs: the agent, plus the parts it may report on."""

    agent: Agent
    host: MCPHost
    store: SQLiteStore
    settings: Settings
    model_name: str
    # The servers file's policy, for front ends that show what a place is offered.
    scopes: Scopes = field(default_factory=Scopes)

    @property
    def offline(self) -> bool:
        return self.settings.uses_offline_model


def agent_config(settings: Settings, mcp: McpConfig | None = None) -> AgentConfig:
    return AgentConfig(
        max_rounds=settings.nerve_max_rounds,
        context_tokens=settings.nerve_context_tokens,
        system_prompt=settings.nerve_system_prompt or DEFAULT_SYSTEM_PROMPT,
        calls=CallSettings(),
        max_question_chars=settings.nerve_max_question_chars,
        max_concurrent_turns=settings.nerve_max_concurrent_turns,
        turn_queue=settings.nerve_turn_queue,
        scopes=mcp.scopes if mcp is not None else Scopes(),
        admins=settings.admins,
        approval_timeout=settings.nerve_approval_timeout,
        input_timeout=settings.nerve_input_timeout,
    )


@asynccontextmanager
async def open_store(settings: Settings) -> AsyncIterator[SQLiteStore]:
    """Only the conversation store: for reading history, which needs no servers and no model."""
    store = await SQLiteStore.open(settings.nerve_db)
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def open_runtime(settings: Settings) -> AsyncIterator[Runtime]:
    """Open the store, start every MCP server, pick the model; close all of it on the way out."""
    mcp = load_mcp_config(settings.nerve_mcp_config)
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(open_store(settings))
        await stack.enter_async_context(
            pruning_inbox(store, retention_hours=settings.nerve_inbox_retention_hours)
        )
        host = MCPHost(
            mcp.servers,
            default_timeout=settings.nerve_tool_timeout,
            max_call_seconds=settings.nerve_tool_max_seconds,
        )
        stack.push_async_callback(host.aclose)
        await host.start()
        llm: LLM
        if settings.uses_offline_model:
            llm, model_name = OfflineModel(), "offline"
        else:
            # Imported only when needed: the client library adds a second to every start-up.
            from bot.model.client import OpenAILLM

            openai_llm = OpenAILLM.from_settings(settings)
            stack.push_async_callback(openai_llm.aclose)
            llm, model_name = openai_llm, settings.nerve_model
        agent = Agent(
            llm=llm,
            host=host,
            store=store,
            inbox=store,
            config=agent_config(settings, mcp),
            turn_lock=store.turn_lock,
            approvals=store,
            inputs=store,
        )
        yield Runtime(
            agent=agent, host=host, store=store, settings=settings, model_name=model_name, scopes=mcp.scopes
        )
