"""`nerve connect <server>` connects the account a bot-identity server's calls use, from the terminal
in the browser; the bot's shared connection then calls as that account.

Real CLI process, real browser hand-off through `BROWSER` (a program that signs in on the notes
server's page and follows the redirect to nerve's loopback port), the real notes server.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from bot.config import Settings
from bot.runtime import open_runtime
from tests.test_notes_oauth_server import start_server, stop_server

ROOT = Path(__file__).resolve().parents[1]
SECRET = "a-test-secret-key-long-enough"


def bot_servers_file(folder: Path, url: str) -> Path:
    """The notes server, with calls carrying nerve's own account (an admin connects it)."""
    path = folder / "mcp.json"
    entry = {"url": url, "allowPrivateNetwork": True, "auth": {"type": "oauth", "identity": "bot"}}
    path.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    return path


async def nerve(env: dict[str, str], *args: str) -> str:
    """`nerve <args>` as a child process that must succeed within a minute; its stdout."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "adapters",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == 0, err.decode()[-2000:]
    return out.decode()


async def test_nerve_connect_signs_the_bot_in_and_its_calls_carry_that_account(tmp_path, monkeypatch):
    notes = await start_server(tmp_path, "--port", "0")
    try:
        servers = tmp_path / "mcp.json"
        entry = {
            "url": notes.mcp_url,
            "allowPrivateNetwork": True,
            "auth": {"type": "oauth", "identity": "bot"},
        }
        servers.write_text(json.dumps({"mcpServers": {"notes": entry}}))
        env = {
            "PATH": "/usr/bin:/bin",
            "NERVE_SECRET_KEY": SECRET,
            "NERVE_DB": str(tmp_path / "nerve.db"),
            "NERVE_MCP_CONFIG": str(servers),
            "NERVE_PUBLIC_URL": "https://nerve.example",
            "BROWSER": f"{sys.executable} -m tests.sign_in_browser carol %s",
        }
        assert "Connected notes" in await nerve(env, "connect", "notes")

        for name, value in env.items():
            monkeypatch.setenv(name, value)
        settings = Settings(_env_file=None)  # type: ignore[call-arg]
        async with open_runtime(settings) as runtime:
            async with asyncio.timeout(20):
                await runtime.host.wait_until_ready()
            result = await runtime.host.call_tool("whoami", {})
        assert "carol" in result.content, result
        assert "call whoami by carol" in notes.log_lines()

        # `nerve ask` uses the stored sign-in on a machine with no public address: NERVE_PUBLIC_URL
        # is for the chat platforms' browsers, and nobody signs in here.
        local = {k: v for k, v in env.items() if k != "NERVE_PUBLIC_URL"} | {"NERVE_MODEL": "offline"}
        assert "carol" in await nerve(local, "ask", "--yes", "who am I at notes?")
    finally:
        await stop_server(notes)


async def test_a_bot_identity_server_nobody_connected_says_how_to_connect_it(tmp_path, monkeypatch):
    notes = await start_server(tmp_path, "--port", "0")
    try:
        servers = tmp_path / "mcp.json"
        entry = {
            "url": notes.mcp_url,
            "allowPrivateNetwork": True,
            "auth": {"type": "oauth", "identity": "bot"},
        }
        servers.write_text(json.dumps({"mcpServers": {"notes": entry}}))
        monkeypatch.setenv("NERVE_SECRET_KEY", SECRET)
        monkeypatch.setenv("NERVE_DB", str(tmp_path / "nerve.db"))
        monkeypatch.setenv("NERVE_MCP_CONFIG", str(servers))
        monkeypatch.setenv("NERVE_PUBLIC_URL", "https://nerve.example")
        async with open_runtime(Settings(_env_file=None)) as runtime:  # type: ignore[call-arg]
            [(name, reason)] = runtime.host.problems()
        assert name == "notes" and "nerve connect notes" in reason, reason
    finally:
        await stop_server(notes)


async def test_nerve_connect_refused_by_the_address_guard_says_why_in_one_line(tmp_path):
    """The server's own (written) address is reached; its sign-in document on another inside address
    is not: one `nerve:` line naming the address and the setting, no traceback."""
    from tests.test_ssrf_guard import http_server, inside

    async with http_server("127.0.0.2", inside) as (inner_port, reached):
        metadata = f"http://127.0.0.2:{inner_port}/.well-known/oauth-protected-resource"

        async def challenge(path: str) -> tuple[int, dict[str, str], bytes]:
            return 401, {"WWW-Authenticate": f'Bearer resource_metadata="{metadata}"'}, b""

        async with http_server("127.0.0.1", challenge) as (port, _):
            servers = tmp_path / "mcp.json"
            entry = {"url": f"http://127.0.0.1:{port}/mcp", "auth": {"type": "oauth", "identity": "bot"}}
            servers.write_text(json.dumps({"mcpServers": {"notes": entry}}))
            env = {
                "PATH": "/usr/bin:/bin",
                "NERVE_SECRET_KEY": SECRET,
                "NERVE_DB": str(tmp_path / "nerve.db"),
                "NERVE_MCP_CONFIG": str(servers),
                "BROWSER": "true",
            }
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "adapters",
                "connect",
                "notes",
                cwd=ROOT,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            async with asyncio.timeout(60):
                _out, err = await process.communicate()
    text = err.decode()
    assert process.returncode == 1, text
    assert text.startswith("nerve: could not connect notes: ") and text.count("\n") == 1, text
    assert "127.0.0.2" in text and "allowPrivateNetwork" in text and "Traceback" not in text
    assert reached == []
