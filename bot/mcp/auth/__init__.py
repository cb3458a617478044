"""Signing in to remote MCP servers with OAuth, for nerve itself and for each person in the chats."""
