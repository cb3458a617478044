"""The prompt the shipped env-query server offers, so `/prompt` can be tried with the servers nerve
ships and no model service: listed and fetched through nerve's own MCP client (the host), and
started in `nerve chat` on the offline model."""

from __future__ import annotations

import re

import pytest

from bot.errors import PromptError
from bot.mcp.host import MCPHost
from bot.types import PromptArgument
from servers.env_query import outdoor_advice_text
from tests.conftest import ROOT, seed_servers
from tests.test_cli import run_nerve
from tests.test_terminal import chat_env


async def test_env_query_offers_outdoor_advice_with_an_area_code_and_an_optional_activity():
    async with MCPHost(seed_servers(), default_timeout=15.0) as host:
        await host.wait_until_ready()
        [prompt] = host.list_prompts()
        assert (prompt.name, prompt.server, prompt.original_name) == (
            "outdoor_advice",
            "env-query",
            "outdoor_advice",
        )
        assert "good time to be outside" in prompt.description
        assert prompt.arguments == (
            PromptArgument(
                name="area_code",
                description="Area code: one capital letter and four digits, e.g. 'A1001'.",
                required=True,
            ),
            PromptArgument(
                name="activity",
                description="What you want to do outside, e.g. 'a run' (the default).",
                required=False,
            ),
        )

        text = await host.get_prompt("outdoor_advice", {"area_code": "A1001"})
        assert text == outdoor_advice_text("A1001")
        assert text.startswith("Is the environment in A1001 good for a run right now?")
        ride = await host.get_prompt("outdoor_advice", {"area_code": "B2002", "activity": "a bike ride"})
        assert ride.startswith("Is the environment in B2002 good for a bike ride right now?")

        with pytest.raises(PromptError, match="needs: area_code"):
            await host.get_prompt("outdoor_advice", {})
        with pytest.raises(PromptError, match=r"'Shanghai' is not an area code.*for example 'A1001'"):
            await host.get_prompt("outdoor_advice", {"area_code": "Shanghai"})


def docs_sample() -> tuple[str, list[str]]:
    """The chat example of `/prompt` in docs/terminal.md: what is typed, and the lines shown after."""
    text = (ROOT / "docs" / "terminal.md").read_text(encoding="utf-8")
    block = text.split("```text\nyou › /prompt ", 1)[1].split("```", 1)[0]
    typed, *shown = block.splitlines()
    return f"/prompt {typed}", shown


def words(text: str) -> str:
    """Text as read: Markdown emphasis gone, blanks and wrapped lines as single spaces."""
    return " ".join(text.replace("**", "").split())


async def test_the_docs_prompt_example_runs_as_shown_on_the_offline_model(tmp_path):
    typed, shown = docs_sample()
    code, out, err = await run_nerve("chat", env=chat_env(tmp_path), stdin=f"{typed}\n/quit\n")
    assert code == 0, err
    said = words(out)
    prompt_line, call_line, verdict = shown
    assert words(prompt_line) in said, "the prompt's text, as the server gave it"
    # The call's line as shown, whatever the call took ("22 ms" in the docs).
    call = re.escape(words(call_line.removesuffix("…"))).replace("22\\ ms", r"\d+\ ms")
    assert re.search(call, said), call_line
    assert words(verdict.removesuffix("…")) in said, "the offline model's verdict from the area's readings"
