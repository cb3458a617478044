"""`/nerve` on Slack: an unknown sub-command is named before the help; tool descriptions cut between words."""

from __future__ import annotations

import json
from pathlib import Path

from bot.types import ToolResult, ToolSpec
from tests.test_slack_dm import command
from tests.test_slack_harness import StaticHost, rig

FORM = "application/x-www-form-urlencoded"
LONG = "Reports the environment " + "conditions " * 30 + "end"


class LongDescriptions(StaticHost):
    def list_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name="status",
                description=LONG,
                parameters={"type": "object", "properties": {}},
                server="static",
                original_name="status",
            )
        ]


async def test_an_unknown_sub_command_is_named_before_the_help(tmp_path: Path) -> None:
    async with rig(tmp_path, []) as r:
        status, text = await r.deliver_raw(command("bogus", "C0CHANNEL"), FORM)
        assert status == 200
        shown = json.loads(text)["text"]
        assert shown.startswith("`bogus` is not a `/nerve` command.")
        assert "/nerve tools" in shown

        _, text = await r.deliver_raw(command("help", "C0CHANNEL"), FORM)
        assert "bogus" not in json.loads(text)["text"] and "is not a" not in json.loads(text)["text"]


async def test_slash_tools_cuts_a_long_description_between_words(tmp_path: Path) -> None:
    host = LongDescriptions({"status": lambda a: ToolResult(content="{}")})
    async with rig(tmp_path, [], host=host) as r:
        status, text = await r.deliver_raw(command("tools", "C0CHANNEL"), FORM)
        assert status == 200
        [line] = [line for line in json.loads(text)["text"].splitlines() if "status" in line]
        summary = line.split(" — ", 1)[1]
        assert summary.endswith("conditions…"), summary
        assert len(summary) <= 200
