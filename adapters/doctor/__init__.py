"""`nerve doctor`: check a deployment and explain each misconfiguration in plain words, with
what to do about it: settings, the servers file, each MCP server, the model, the database, and
Slack and Discord when they are configured. See `run.py` for the order and the exit code.

Nothing is imported here: the log format borrows the report's redactor, and the report must be
importable without the whole command."""
