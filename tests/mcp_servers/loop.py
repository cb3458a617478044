"""`tests.loop_server`, the agent-loop tests' server, started warm (`tests/mcp_servers/warm_start.py`):
the same `main` in a real process on real stdio pipes, without importing the SDK again."""

from tests.loop_server import main

if __name__ == "__main__":
    main()
