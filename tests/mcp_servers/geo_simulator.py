"""`servers.geo_simulator`, nerve's own server, started warm in the tests (`tests/mcp_servers/warm_start.py`):
the same module's `main` in a real process on real stdio pipes, without importing the SDK again."""

from servers.geo_simulator import main

if __name__ == "__main__":
    main()
