"""Signing in to remote MCP servers with OAuth.

`provider`: the `mcp` SDK's OAuth client as nerve uses it (`NerveOAuth`, `auth_for`, nerve's Client
ID Metadata Document); `loopback`: the browser sign-in of a person at this machine; `memory`: tokens
kept for one run. The per-person sign-in of the chats (`sign_ins`, `tokens`, `vault`) builds on them.
"""
