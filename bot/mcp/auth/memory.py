"""Sign-in state kept in memory only: for one run of the terminal, `nerve connect` before it is
saved, and the conformance client. Gone when the process ends, which is the point there."""

from __future__ import annotations

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken


class MemoryTokens:
    """`mcp.client.auth.TokenStorage` in memory: one server's tokens and client registration."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info
