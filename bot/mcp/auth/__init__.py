"""Signing in to remote MCP servers with OAuth: nerve's provider, the loopback sign-in, tokens kept
in memory, and the per-person sign-in of the chats (`sign_ins`, `tokens`, `vault`)."""
