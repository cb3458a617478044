"""`nerve doctor` on servers that need a sign-in: missing settings, per-person and bot identities."""

from __future__ import annotations

import json
from pathlib import Path

from tests.ports import unused_port
from tests.test_doctor import doctor
from tests.test_notes_oauth_server import start_server, stop_server

SECRET = "a-test-secret-key-long-enough"


def servers_file(folder: Path, url: str, identity: str) -> str:
    path = folder / f"mcp-{identity}.json"
    entry = {"url": url, "allowPrivateNetwork": True, "auth": {"type": "oauth", "identity": identity}}
    path.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    return str(path)


async def test_doctor_explains_what_a_sign_in_server_needs(tmp_path):
    notes = await start_server(tmp_path, "--port", "0")
    try:
        per_person = servers_file(tmp_path, notes.mcp_url, "user")
        no_key = await doctor(tmp_path, NERVE_MCP_CONFIG=per_person)
        assert no_key.code != 0
        shown = no_key.out + no_key.err
        assert any("error" in line and "NERVE_SECRET_KEY" in line for line in no_key.lines), shown

        # The terminal-only sign-in of the README: the terminal signs in through its own address.
        no_url = await doctor(tmp_path, NERVE_MCP_CONFIG=per_person, NERVE_SECRET_KEY=SECRET)
        [line] = [line for line in no_url.lines if line.split()[1:2] == ["sign-in"]]
        assert line.startswith("warning") and "nerve slack and nerve discord would need it" in line, line
        assert "set NERVE_PUBLIC_URL" in line, line
        [line] = [line for line in no_url.lines if "server notes" in line]
        assert line.startswith("ok") and "each person signs in" in line, line
        assert no_url.code == 0, no_url.out

        # With Discord set up the same settings cannot start it: an error, and still the server's line.
        discord = {"DISCORD_BOT_TOKEN": "a.b.c", "DISCORD_API_BASE_URL": f"http://127.0.0.1:{unused_port()}"}
        for_discord = await doctor(tmp_path, NERVE_MCP_CONFIG=per_person, NERVE_SECRET_KEY=SECRET, **discord)
        [line] = [line for line in for_discord.lines if line.split()[1:2] == ["sign-in"]]
        assert line.startswith("error") and "Discord cannot start without it" in line, line
        assert any("server notes" in line for line in for_discord.lines), for_discord.out

        settings = {"NERVE_SECRET_KEY": SECRET, "NERVE_PUBLIC_URL": "https://nerve.example"}
        fine = await doctor(tmp_path, NERVE_MCP_CONFIG=per_person, **settings)
        [line] = [line for line in fine.lines if "server notes" in line]
        assert line.startswith("ok") and "each person signs in; 0 people have connected" in line, line

        bot = await doctor(
            tmp_path, NERVE_MCP_CONFIG=servers_file(tmp_path, notes.mcp_url, "bot"), **settings
        )
        [line] = [line for line in bot.lines if "server notes" in line]
        assert line.startswith("error") and "nerve connect notes" in line, line
        assert bot.code != 0
    finally:
        await stop_server(notes)
