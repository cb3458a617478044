"""`nerve slack` as an operator starts it: a failure to start is one plain line and a non-zero exit."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from tests.conftest import ROOT
from tests.fakes.slack_api import FakeSlack
from tests.ports import unused_port
from tests.test_cli import nerve_env


async def run_nerve(*args: str, env: dict[str, str], within: float = 60) -> tuple[int, str, str]:
    """`python -m bot ARGS`; a process still running after `within` seconds is killed (and fails)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot",
        *args,
        env=env,
        cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), within)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"nerve {' '.join(args)} was still running after {within} s") from None
    return process.returncode or 0, out.decode(), err.decode()


def slack_env(tmp_path: Path, api_url: str, **extra: str) -> dict[str, str]:
    servers = tmp_path / "mcp.json"
    servers.write_text(json.dumps({"mcpServers": {}}))
    env = nerve_env(
        tmp_path,
        NERVE_MCP_CONFIG=str(servers),
        SLACK_BOT_TOKEN="xoxb-test-token",
        SLACK_SIGNING_SECRET="test-signing-secret",
        SLACK_API_BASE_URL=api_url,
        NERVE_HTTP_HOST="127.0.0.1",
        NERVE_HTTP_PORT="0",
    )
    env.pop("SLACK_APP_TOKEN", None)
    env.update(extra)
    return env


def assert_one_plain_line(code: int, err: str) -> str:
    assert code != 0
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("nerve: ")
    return lines[0]


async def test_nerve_slack_with_slack_unreachable_says_so_in_one_line_and_exits_non_zero(
    tmp_path: Path,
) -> None:
    url = f"http://127.0.0.1:{unused_port()}/api/"
    code, _, err = await run_nerve("slack", env=slack_env(tmp_path, url))
    line = assert_one_plain_line(code, err)
    assert "cannot reach Slack" in line and url in line and "SLACK_API_BASE_URL" in line


async def test_nerve_slack_with_a_rejected_token_says_so_in_one_line_and_exits_non_zero(
    tmp_path: Path,
) -> None:
    async with FakeSlack() as slack:
        slack.fail_next["auth.test"] = "invalid_auth"
        code, _, err = await run_nerve("slack", env=slack_env(tmp_path, slack.api_url))
    line = assert_one_plain_line(code, err)
    assert "SLACK_BOT_TOKEN" in line and "invalid_auth" in line
    assert "xoxb-test-token" not in err


async def test_nerve_slack_in_socket_mode_with_a_rejected_app_token_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    async with FakeSlack() as slack:
        slack.fail_next["apps.connections.open"] = "invalid_auth"
        env = slack_env(tmp_path, slack.api_url, SLACK_APP_TOKEN="xapp-test-token")
        code, _, err = await run_nerve("slack", env=env)
    line = assert_one_plain_line(code, err)
    assert "SLACK_APP_TOKEN" in line and "invalid_auth" in line
    assert "xapp-test-token" not in err
