"""Small MCP servers that misbehave on purpose, run as real stdio subprocesses by the host tests."""
