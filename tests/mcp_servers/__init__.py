"""Small MCP servers that misbehave on purpose, run as real stdio subprocesses by the host tests."""

from tests.mcp_servers.warm_start import hand_over_if_warm

hand_over_if_warm()
