"""The `/nerve` usage hint Slack shows while typing names every sub-command `/nerve help` lists,
in both app manifests, so what a person sees before pressing Enter matches what the help says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from adapters.slack.commands import HELP
from tests.conftest import ROOT

MANIFESTS = [ROOT / "slack" / "manifest.socket.yaml", ROOT / "slack" / "manifest.http.yaml"]


def help_commands() -> list[str]:
    """`tools`, `prompt NAME`, `forget me`, …: each `/nerve …` of the help, up to its first lower-case
    argument (`me` is no argument: it is part of the command)."""
    found = re.findall(r"`/nerve ([a-z]+(?: [A-Z]+| me(?=`))?)", HELP)
    return list(dict.fromkeys(found))


def hint_commands(path: Path) -> list[str]:
    [command] = yaml.safe_load(path.read_text(encoding="utf-8"))["features"]["slash_commands"]
    hint = command["usage_hint"]
    assert hint.startswith("[") and hint.endswith("]"), hint
    return [part.strip() for part in hint[1:-1].split("|")]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda path: path.name)
def test_the_usage_hint_lists_every_sub_command_the_help_lists(path: Path) -> None:
    listed = help_commands()
    assert {"tools", "prompts", "prompt NAME", "approvals", "connections", "connect NAME", "help"} <= set(
        listed
    )
    assert sorted(hint_commands(path)) == sorted(listed)
