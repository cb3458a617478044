"""What a command loads before it runs: `nerve --help` or a start-up must not pay for parts it does not
use (the MCP OAuth client, the Slack and Discord libraries, rich, the optional extras).

Structural, not timed: a fresh interpreter imports the module and the test reads `sys.modules`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Each costs a noticeable part of a start-up and is used only by some commands.
HEAVY_FOR_THE_COMMAND_LINE = (
    "mcp",
    "bot.runtime",
    "bot.agent",
    "bot.mcp.auth.sign_ins",
    "bot.mcp.auth.provider",
    "slack_bolt",
    "slack_sdk",
    "discord",
    "aiohttp",
    "rich",
    "prometheus_client",
    "opentelemetry",
    "psycopg",
    "procrastinate",
    "openai",
)
# Loaded only when a server of the servers file signs in, or with the extras configured; the line
# editor only by the chat (a one-shot `nerve ask` reads no lines unless it asks someone); the PDF
# and image readers with the first such file read.
HEAVY_FOR_A_RUNTIME = (
    "prompt_toolkit",
    "pypdf",
    "PIL",
    "mcp.client.auth",
    "bot.mcp.auth.sign_ins",
    "bot.mcp.auth.provider",
    "slack_bolt",
    "discord",
    "opentelemetry.sdk",
    "psycopg",
    "procrastinate",
    "openai",
)


def loaded_by(*modules: str) -> set[str]:
    """The modules a fresh interpreter holds after importing `modules`."""
    code = "import importlib, json, sys\n"
    code += "".join(f"importlib.import_module({name!r})\n" for name in modules)
    code += "print(json.dumps(sorted(sys.modules)))"
    argv = [sys.executable, "-c", code]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(done.stdout))


def heavy_among(loaded: set[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(
        name for name in heavy if name in loaded or any(found.startswith(f"{name}.") for found in loaded)
    )


def test_importing_the_command_line_loads_none_of_the_heavy_parts():
    assert heavy_among(loaded_by("adapters.cli"), HEAVY_FOR_THE_COMMAND_LINE) == []


@pytest.mark.parametrize("module", ["bot.runtime", "adapters.terminal.views", "adapters.terminal.runtime"])
def test_the_ask_and_chat_runtime_loads_no_sign_in_client_front_end_or_extra(module):
    assert heavy_among(loaded_by(module), HEAVY_FOR_A_RUNTIME) == []


# What reads only the database: the MCP client, the model client and the servers' start stay unloaded.
HEAVY_FOR_THE_DATABASE_COMMANDS = ("mcp", "bot.runtime", "bot.mcp.host", "openai", "aiohttp")


def test_the_conversation_commands_load_no_mcp_or_model_client():
    """`nerve threads`, `history` and `delete` read the store: they start in a fraction of a second."""
    assert heavy_among(loaded_by("adapters.conversations_cli"), HEAVY_FOR_THE_DATABASE_COMMANDS) == []
