"""Prompts servers offer, as nerve offers them to people (slash commands with arguments).

A prompt is a template a server fills in; nerve lists them per server, gives each a name unique
across servers (the server's own name when it is unique, else `server_prompt`), and turns what a
server returns into the text that starts a turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mcp_types

from bot.mcp.results import describe_block
from bot.types import PromptArgument, PromptSpec

MAX_PROMPT_PAGES = 20


def prompt_specs(listings: Mapping[str, Sequence[mcp_types.Prompt]]) -> dict[str, PromptSpec]:
    """Every server's prompts under names unique across servers, in server order."""
    counts: dict[str, int] = {}
    for prompts in listings.values():
        for prompt in prompts:
            counts[prompt.name] = counts.get(prompt.name, 0) + 1
    specs: dict[str, PromptSpec] = {}
    for server, prompts in listings.items():
        for prompt in prompts:
            name = prompt.name if counts[prompt.name] == 1 else f"{server}_{prompt.name}"
            specs[name] = PromptSpec(
                name=name,
                server=server,
                original_name=prompt.name,
                title=prompt.title or prompt.name,
                description=prompt.description or "",
                arguments=tuple(
                    PromptArgument(name=a.name, description=a.description or "", required=bool(a.required))
                    for a in prompt.arguments or ()
                ),
            )
    return specs


def prompt_text(result: mcp_types.GetPromptResult) -> str:
    """The prompt's messages as one question: people's parts as written, the assistant's labelled."""
    parts = []
    for message in result.messages:
        text = describe_block(message.content)
        parts.append(text if message.role == "user" else f"(assistant) {text}")
    return "\n\n".join(part for part in parts if part.strip())
