"""A test MCP server that fails on purpose: at start-up, on a call, or for good after a call.

Run as `python -m tests.mcp_servers.flaky` with `FLAKY_STATE` naming a directory it may write to.
`FLAKY_FAIL_STARTS=N` makes the first N starts fail; the tool `crash_and_stay_down` kills the
process and makes every later start fail. Each failure first writes `FLAKY_SECRET` to stderr, the
kind of line (a key, a connection string) that must end in the log and nowhere else.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

STATE = Path(os.environ["FLAKY_STATE"])
SECRET = os.environ.get("FLAKY_SECRET", "FATAL: login failed for api_key=sk-test-0000")


def _fail_start_if_asked() -> None:
    """Checked before the SDK is imported, so a failing start costs milliseconds."""
    starts = STATE / "starts"
    count = int(starts.read_text()) + 1 if starts.exists() else 1
    starts.write_text(str(count))
    if (STATE / "down").exists() or count <= int(os.environ.get("FLAKY_FAIL_STARTS", "0")):
        sys.stderr.write(SECRET + "\n")
        sys.stderr.flush()
        sys.exit(1)


def main() -> None:
    _fail_start_if_asked()
    from mcp.server import MCPServer
    from mcp_types import ToolAnnotations

    server = MCPServer("flaky", log_level="WARNING")
    # echo only answers; the crash tools change the server for good and say nothing.
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=read_only)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def crash() -> str:
        """Kill the server process mid-call; the next start works."""
        os._exit(1)

    @server.tool()
    def crash_and_stay_down() -> str:
        """Write the secret to stderr, kill the process, and make every later start fail."""
        (STATE / "down").write_text("1")
        sys.stderr.write(SECRET + "\n")
        sys.stderr.flush()
        os._exit(1)

    server.run("stdio")


if __name__ == "__main__":
    main()
