"""notes-oauth: an MCP server that needs a per-person OAuth sign-in, with its own small authorization server.

It exists so nerve's sign-in to remote MCP servers can be tried and tested end to end on one machine:
`python -m servers.notes_oauth --port 8765` serves the MCP endpoint at `/mcp` (every request needs a
bearer token), the metadata documents of RFC 9728 and RFC 8414, dynamic client registration, a
sign-in page, the token and revocation endpoints. Each person's notes are their own, so a test can
tell whose token a call carried. See servers/README.md for the options.
"""
