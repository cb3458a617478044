"""Prompts servers offer, as nerve offers them to people (slash commands with arguments).

A prompt is a template a server fills in; nerve lists them per server, gives each a name unique
across servers (the server's own name when it is unique, else `server_prompt`), and turns what a
server returns into the text that starts a turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mcp_types

from bot.mcp.naming import Collision, unique_names
from bot.mcp.results import describe_block
from bot.types import PromptArgument, PromptSpec


def prompt_specs(
    listings: Mapping[str, Sequence[mcp_types.Prompt]],
) -> tuple[dict[str, PromptSpec], list[Collision]]:
    """Every server's prompts under names unique across servers, in server order, and the collisions.

    The same rule as tools (`bot.mcp.naming`): a prompt keeps its name unless another server's
    prompt would be taken for it; then every party is offered as `server_prompt`. A server can
    never take over another server's prompt, whatever it names its own.
    """
    entries = [(server, prompt.name) for server, prompts in listings.items() for prompt in prompts]
    names, collisions = unique_names(entries, clean=_as_is, separator="_")
    specs: dict[str, PromptSpec] = {}
    for server, prompts in listings.items():
        for prompt in prompts:
            name = names[(server, prompt.name)]
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
    return specs, collisions


def _as_is(name: str) -> str:
    return name


def prompt_text(result: mcp_types.GetPromptResult) -> str:
    """The prompt's messages as one question: people's parts as written, the assistant's labelled."""
    parts = []
    for message in result.messages:
        text = describe_block(message.content)
        parts.append(text if message.role == "user" else f"(assistant) {text}")
    return "\n\n".join(part for part in parts if part.strip())
