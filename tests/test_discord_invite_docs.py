"""The Discord page's invite recipe grants what nerve uses, and its number is those permissions."""

from __future__ import annotations

import re

import discord

from tests.conftest import ROOT

# What nerve does on Discord: read and post in channels and its threads, open threads for answers,
# read a thread back after a restart, show approvals as embeds, upload long answers and results.
USED = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    create_public_threads=True,
    read_message_history=True,
    embed_links=True,
    attach_files=True,
)


def test_the_invite_recipe_asks_for_exactly_the_permissions_nerve_uses() -> None:
    page = " ".join((ROOT / "docs" / "discord.md").read_text(encoding="utf-8").split())
    numbers = {int(n) for n in re.findall(r"the sum of those bits, (\d+)", page)}
    assert numbers == {USED.value}
    for name in ("Attach Files", "Embed Links", "Send Messages in Threads", "Create Public Threads"):
        assert name in page
    assert "scope=bot+applications.commands&permissions=PERMISSIONS" in page
