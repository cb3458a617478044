"""The reference loop: the same model client and MCP SDK that nerve uses, with nothing else.

What a minimal agent framework does: one `mcp.Client` per server shared by every conversation,
`openai.AsyncOpenAI` for the model, the calls of one model message run with `asyncio.gather`, and
the whole history sent every round. No persistence, no argument validation, no guards, no context
budget. Every benchmark figure is divided by this loop's figure from the same run, so the ratio
shows what nerve's extra work costs and survives a slow or noisy machine.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any, Self

import openai
from mcp import Client, StdioServerParameters


class BareLoop:
    """`async with BareLoop(...) as loop:` then `await loop.reply(thread, text)`."""

    def __init__(
        self, *, base_url: str, model: str, system_prompt: str, servers: Mapping[str, StdioServerParameters]
    ) -> None:
        self._servers = dict(servers)
        self._model = model
        self._system = system_prompt
        self._llm = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=60.0)
        self._stack = AsyncExitStack()
        self._routes: dict[str, Client] = {}
        self._tools: list[dict[str, Any]] = []
        self._threads: dict[str, list[dict[str, Any]]] = {}

    async def __aenter__(self) -> Self:
        clients = [Client(params) for params in self._servers.values()]
        # Started together, like nerve's host; each client is entered and left in its own task, as
        # anyio's cancel scopes require.
        stop = asyncio.Event()
        readies = [asyncio.Event() for _ in clients]
        owners = [asyncio.create_task(_own(c, r, stop)) for c, r in zip(clients, readies, strict=True)]
        self._stack.push_async_callback(_wait_all, owners)
        self._stack.callback(stop.set)
        for owner, ready in zip(owners, readies, strict=True):
            waiter = asyncio.create_task(ready.wait())
            await asyncio.wait([waiter, owner], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if owner.done():  # it failed to start: stop the others and raise its error
                await self._stack.aclose()
                owner.result()
        for client in clients:
            for tool in (await client.list_tools()).tools:
                self._routes[tool.name] = client
                schema = {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
                self._tools.append({"type": "function", "function": schema})
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()
        await self._llm.close()

    async def reply(self, thread: str, text: str, max_rounds: int = 8) -> str:
        """One turn: ask, run every tool call of the answer at once, repeat until plain text."""
        history = self._threads.setdefault(thread, [{"role": "system", "content": self._system}])
        history.append({"role": "user", "content": text})
        for _ in range(max_rounds):
            response = await self._llm.chat.completions.create(
                model=self._model,
                messages=history,  # type: ignore[arg-type]  # plain dicts, as frameworks keep them
                tools=self._tools,  # type: ignore[arg-type]
            )
            message = response.choices[0].message
            calls = [c for c in message.tool_calls or () if c.type == "function"]
            history.append({"role": "assistant", "content": message.content})
            if not calls:
                return message.content or ""
            history[-1]["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in calls
            ]
            results = await asyncio.gather(
                *(self._call(c.function.name, c.function.arguments) for c in calls)
            )
            history.extend(
                {"role": "tool", "tool_call_id": c.id, "content": r}
                for c, r in zip(calls, results, strict=True)
            )
        return ""

    async def _call(self, name: str, arguments: str) -> str:
        result = await self._routes[name].call_tool(name, json.loads(arguments or "{}"))
        return "\n".join(block.text for block in result.content if block.type == "text")


async def _own(client: Client, ready: asyncio.Event, stop: asyncio.Event) -> None:
    async with client:
        ready.set()
        await stop.wait()


async def _wait_all(tasks: list[asyncio.Task[None]]) -> None:
    await asyncio.gather(*tasks)
