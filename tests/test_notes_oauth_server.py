"""The OAuth-protected notes server, driven as a real subprocess over loopback HTTP.

nerve's per-person sign-in is tested against this server, so its own behaviour must hold first: the
401 that starts discovery, the metadata documents, registration, the sign-in page, PKCE, the resource
indicator, token rotation, revocation and the 403 that asks for more scope.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
import secrets
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import httpx2
import pytest
import pytest_asyncio
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

from servers.notes_oauth.sign_in import sign_in_as

ROOT = Path(__file__).resolve().parents[1]
SHARED = pytest.mark.asyncio(loop_scope="module")
pytestmark = SHARED
READY = re.compile(r"notes-oauth ready mcp=(\S+) issuer=(\S+)")
LOOPBACK_CALLBACK = "http://127.0.0.1:33418/callback"
TRUSTED_CLIENT_ID = "https://bot.example/oauth/client.json"
TRUSTED_CALLBACK = "https://bot.example/oauth/callback"


@dataclass
class RunningServer:
    process: asyncio.subprocess.Process
    mcp_url: str
    issuer: str
    log_file: Path

    @property
    def port(self) -> int:
        port = urlparse(self.mcp_url).port
        assert port is not None
        return port

    def log_lines(self) -> list[str]:
        return self.log_file.read_text(encoding="utf-8").splitlines() if self.log_file.exists() else []


def per_person_servers_file(folder: Path, mcp_url: str) -> Path:
    """A servers file with the notes server at `mcp_url`, which people sign in to with their own
    account."""
    config = folder / "mcp.json"
    entry = {
        "url": mcp_url,
        "allowPrivateNetwork": True,
        "trustAnnotations": True,
        "auth": {"type": "oauth", "identity": "user"},
    }
    config.write_text(json.dumps({"mcpServers": {"notes": entry}}))
    return config


async def start_server(tmp: Path, *args: str) -> RunningServer:
    log_file = tmp / "calls.log"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "servers.notes_oauth",
        "--log",
        str(log_file),
        *args,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE,
        stderr=(tmp / "stderr.log").open("ab"),
    )
    assert process.stdout is not None
    async with asyncio.timeout(30):
        while True:
            line = (await process.stdout.readline()).decode()
            if not line:
                raise AssertionError(f"the server exited: {(tmp / 'stderr.log').read_text()[-2000:]}")
            if match := READY.search(line):
                return RunningServer(process, match.group(1), match.group(2), log_file)


async def stop_server(server: RunningServer) -> int:
    if server.process.returncode is None:
        server.process.terminate()
    async with asyncio.timeout(15):
        return await server.process.wait()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningServer]:
    """The authorization server on a port of its own, as a real deployment would have it."""
    tmp = tmp_path_factory.mktemp("notes")
    document = tmp / "client.json"
    document.write_text(
        json.dumps(
            {
                "client_id": TRUSTED_CLIENT_ID,
                "client_name": "nerve on Slack",
                "redirect_uris": [TRUSTED_CALLBACK],
                "token_endpoint_auth_method": "none",
            }
        )
    )
    trust = f"{TRUSTED_CLIENT_ID}={document}"
    running = await start_server(tmp, "--port", "0", "--issuer-port", "0", "--trust-client-metadata", trust)
    try:
        yield running
    finally:
        await stop_server(running)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def http() -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(timeout=15, follow_redirects=False) as client:
        yield client


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


async def register(http: httpx2.AsyncClient, server: RunningServer, **metadata: Any) -> dict[str, Any]:
    body = {"redirect_uris": [LOOPBACK_CALLBACK], "token_endpoint_auth_method": "none", **metadata}
    answer = await http.post(f"{server.issuer}/register", json=body)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def authorize_url(server: RunningServer, client_id: str, challenge: str, **overrides: str) -> str:
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": LOOPBACK_CALLBACK,
        "state": "state-" + secrets.token_hex(4),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "notes:read notes:write",
        "resource": server.mcp_url,
        **overrides,
    }
    return f"{server.issuer}/authorize?{urlencode(query)}"


def redirect_fields(location: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlparse(location).query).items()}


async def code_for(server: RunningServer, client_id: str, challenge: str, user: str = "alice") -> str:
    return redirect_fields(await sign_in_as(authorize_url(server, client_id, challenge), user))["code"]


@dataclass
class Grant:
    client_id: str
    access_token: str
    refresh_token: str
    scope: str
    expires_in: int


async def sign_in(
    http: httpx2.AsyncClient, server: RunningServer, user: str, scope: str = "notes:read notes:write"
) -> Grant:
    client = await register(http, server)
    verifier, challenge = pkce_pair()
    location = await sign_in_as(authorize_url(server, client["client_id"], challenge, scope=scope), user)
    fields = redirect_fields(location)
    answer = await http.post(
        f"{server.issuer}/token",
        data={
            "grant_type": "authorization_code",
            "code": fields["code"],
            "redirect_uri": LOOPBACK_CALLBACK,
            "client_id": client["client_id"],
            "code_verifier": verifier,
            "resource": server.mcp_url,
        },
    )
    assert answer.status_code == 200, answer.text
    token = answer.json()
    return Grant(
        client["client_id"],
        token["access_token"],
        token["refresh_token"],
        token["scope"],
        token["expires_in"],
    )


@contextlib.asynccontextmanager
async def mcp_client(url: str, access_token: str, mode: str = "legacy") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {access_token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=15) as bearer_http,
        Client(streamable_http_client(url, http_client=bearer_http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        yield client


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def www_authenticate_fields(header: str) -> dict[str, str]:
    assert header.startswith("Bearer ")
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


async def test_mcp_without_a_token_answers_401_pointing_at_the_resource_metadata(http, server):
    answer = await http.post(server.mcp_url, json=INITIALIZE, headers=MCP_HEADERS)
    assert answer.status_code == 401
    fields = www_authenticate_fields(answer.headers["www-authenticate"])
    assert (
        fields["resource_metadata"]
        == f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp"
    )
    assert fields["scope"] == "notes:read notes:write"
    assert "error" not in fields  # RFC 6750 §3.1: no error code when no credentials were sent

    forged = await http.post(
        server.mcp_url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer x"}
    )
    assert forged.status_code == 401
    assert www_authenticate_fields(forged.headers["www-authenticate"])["error"] == "invalid_token"


async def test_protected_resource_metadata_names_the_resource_and_its_issuer(http, server):
    answer = await http.get(f"http://127.0.0.1:{server.port}/.well-known/oauth-protected-resource/mcp")
    assert answer.status_code == 200
    document = answer.json()
    assert document["resource"] == server.mcp_url
    assert document["authorization_servers"] == [server.issuer]
    assert {"notes:read", "notes:write", "notes:admin"} <= set(document["scopes_supported"])
    assert server.issuer != f"http://127.0.0.1:{server.port}"  # --issuer-port put it on a port of its own


async def test_authorization_server_metadata_advertises_what_the_server_enforces(http, server):
    answer = await http.get(f"{server.issuer}/.well-known/oauth-authorization-server")
    assert answer.status_code == 200
    document = answer.json()
    assert document["issuer"] == server.issuer
    for endpoint in ("authorization", "token", "registration", "revocation"):
        assert document[f"{endpoint}_endpoint"].startswith(server.issuer + "/")
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["scopes_supported"] == ["notes:read", "notes:write", "notes:admin", "offline_access"]
    assert document["authorization_response_iss_parameter_supported"] is True
    assert document["client_id_metadata_document_supported"] is True
    assert {"none", "client_secret_post", "client_secret_basic"} <= set(
        document["token_endpoint_auth_methods_supported"]
    )
    assert {"authorization_code", "refresh_token"} <= set(document["grant_types_supported"])


async def test_dynamic_client_registration_issues_an_id_and_a_secret_only_when_asked(http, server):
    public = await register(http, server)
    assert public["client_id"] and "client_secret" not in public
    assert public["redirect_uris"] == [LOOPBACK_CALLBACK]

    confidential = await register(http, server, token_endpoint_auth_method="client_secret_post")
    assert confidential["client_secret"]

    refused = await http.post(f"{server.issuer}/register", json={"redirect_uris": []})
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_client_metadata"


async def test_the_authorize_page_asks_who_signs_in_and_keeps_the_request_in_hidden_fields(http, server):
    client = await register(http, server, client_name="nerve")
    _, challenge = pkce_pair()
    page = await http.get(authorize_url(server, client["client_id"], challenge, state="keep-me"))
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "Sign in to Notes as" in page.text
    assert 'name="user"' in page.text
    assert re.search(r'<input type="hidden" name="state" value="keep-me"', page.text)
    assert re.search(r'<input type="hidden" name="code_challenge" value="' + re.escape(challenge), page.text)
    assert "Allow" in page.text


async def test_signing_in_redirects_back_with_code_state_and_issuer(http, server):
    client = await register(http, server)
    _, challenge = pkce_pair()
    location = await sign_in_as(authorize_url(server, client["client_id"], challenge, state="s-42"), "alice")
    assert location.startswith(LOOPBACK_CALLBACK + "?")
    fields = redirect_fields(location)
    assert fields["state"] == "s-42"
    assert fields["iss"] == server.issuer
    assert len(fields["code"]) >= 32


async def test_declining_sends_access_denied_back_to_the_client(http, server):
    client = await register(http, server)
    _, challenge = pkce_pair()
    url = authorize_url(server, client["client_id"], challenge, state="s-1")
    fields = redirect_fields(await sign_in_as(url, "bob", allow=False))
    assert (fields["error"], fields["state"], fields["iss"]) == ("access_denied", "s-1", server.issuer)
    assert "code" not in fields


async def exchange(http, server, client_id: str, code: str, verifier: str, **extra: str) -> httpx2.Response:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": LOOPBACK_CALLBACK,
        "client_id": client_id,
        "code_verifier": verifier,
        "resource": server.mcp_url,
        **extra,
    }
    return await http.post(f"{server.issuer}/token", data=form)


async def test_a_code_verifier_that_does_not_match_the_challenge_is_refused(http, server):
    client = await register(http, server)
    verifier, challenge = pkce_pair()
    code = await code_for(server, client["client_id"], challenge)
    wrong = await exchange(http, server, client["client_id"], code, verifier[::-1])
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "invalid_grant"


async def test_a_challenge_without_s256_is_refused(http, server):
    client = await register(http, server)
    _, challenge = pkce_pair()
    location = await sign_in_as(
        authorize_url(server, client["client_id"], challenge, code_challenge_method="plain"), "alice"
    )
    assert redirect_fields(location)["error"] == "invalid_request"


async def test_a_token_for_another_resource_is_refused_at_both_endpoints(http, server):
    client = await register(http, server)
    verifier, challenge = pkce_pair()
    elsewhere = "http://127.0.0.1:1/mcp"
    location = await sign_in_as(
        authorize_url(server, client["client_id"], challenge, resource=elsewhere), "alice"
    )
    assert redirect_fields(location)["error"] == "invalid_target"
    missing = await sign_in_as(authorize_url(server, client["client_id"], challenge, resource=""), "alice")
    assert redirect_fields(missing)["error"] == "invalid_target"

    code = await code_for(server, client["client_id"], challenge)
    answer = await exchange(http, server, client["client_id"], code, verifier, resource=elsewhere)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_target"


async def test_an_unregistered_redirect_uri_gets_an_error_page_not_a_redirect(http, server):
    client = await register(http, server)
    _, challenge = pkce_pair()
    url = authorize_url(server, client["client_id"], challenge, redirect_uri="https://attacker.example/cb")
    page = await http.get(url)
    assert page.status_code == 400
    assert "location" not in page.headers


async def test_a_redirect_uri_at_the_token_endpoint_must_match_the_one_signed_in_with(http, server):
    client = await register(http, server)
    verifier, challenge = pkce_pair()
    code = await code_for(server, client["client_id"], challenge)
    answer = await exchange(
        http, server, client["client_id"], code, verifier, redirect_uri="http://127.0.0.1:9/x"
    )
    assert answer.status_code == 400


async def test_a_code_is_single_use_and_its_replay_revokes_what_it_gave(http, server):
    client = await register(http, server)
    verifier, challenge = pkce_pair()
    code = await code_for(server, client["client_id"], challenge)
    first = await exchange(http, server, client["client_id"], code, verifier)
    assert first.status_code == 200
    again = await exchange(http, server, client["client_id"], code, verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    replayed = await http.post(
        server.mcp_url,
        json=INITIALIZE,
        headers={**MCP_HEADERS, "Authorization": f"Bearer {first.json()['access_token']}"},
    )
    assert replayed.status_code == 401


async def test_the_token_carries_the_person_into_mcp_calls(http, server):
    grant = await sign_in(http, server, "alice")
    assert grant.scope == "notes:read notes:write"
    assert grant.expires_in == 3600
    async with mcp_client(server.mcp_url, grant.access_token) as client:
        result = await client.call_tool("whoami", {})
    assert not result.is_error
    assert text_of(result) == "alice"
    assert "call whoami by alice" in server.log_lines()


async def test_the_current_protocol_revision_carries_the_person_too(http, server):
    grant = await sign_in(http, server, "carol")
    async with mcp_client(server.mcp_url, grant.access_token, mode="2026-07-28") as client:
        result = await client.call_tool("whoami", {})
    assert text_of(result) == "carol"


async def test_two_people_see_their_own_notes(http, server):
    dana = await sign_in(http, server, "dana")
    erin = await sign_in(http, server, "erin")
    async with mcp_client(server.mcp_url, dana.access_token) as client:
        await client.call_tool("add_note", {"text": "buy milk"})
    async with mcp_client(server.mcp_url, erin.access_token) as client:
        await client.call_tool("add_note", {"text": "call mum"})
        erin_notes = (await client.call_tool("list_notes", {})).structured_content
    async with mcp_client(server.mcp_url, dana.access_token) as client:
        dana_notes = (await client.call_tool("list_notes", {})).structured_content
    assert dana_notes == {"result": ["buy milk"]}
    assert erin_notes == {"result": ["call mum"]}
    lines = server.log_lines()
    assert "call add_note by dana" in lines and "call list_notes by erin" in lines


async def refresh(http, server, grant: Grant, **extra: str) -> httpx2.Response:
    form = {
        "grant_type": "refresh_token",
        "refresh_token": grant.refresh_token,
        "client_id": grant.client_id,
        "resource": server.mcp_url,
        **extra,
    }
    return await http.post(f"{server.issuer}/token", data=form)


async def test_refreshing_rotates_the_refresh_token(http, server):
    grant = await sign_in(http, server, "frank")
    answer = await refresh(http, server, grant)
    assert answer.status_code == 200, answer.text
    renewed = answer.json()
    assert renewed["refresh_token"] != grant.refresh_token
    assert renewed["access_token"] != grant.access_token
    stale = await refresh(http, server, grant)
    assert stale.status_code == 400
    assert stale.json()["error"] == "invalid_grant"
    async with mcp_client(server.mcp_url, renewed["access_token"]) as client:
        assert text_of(await client.call_tool("whoami", {})) == "frank"


async def test_a_refresh_for_another_resource_is_refused(http, server):
    grant = await sign_in(http, server, "frank")
    answer = await refresh(http, server, grant, resource="http://127.0.0.1:1/mcp")
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_target"


async def test_revoking_a_token_makes_the_mcp_endpoint_refuse_it(http, server):
    grant = await sign_in(http, server, "gina")
    bearer = {**MCP_HEADERS, "Authorization": f"Bearer {grant.access_token}"}
    before = await http.post(server.mcp_url, json=INITIALIZE, headers=bearer)
    assert before.status_code == 200
    revoked = await http.post(
        f"{server.issuer}/revoke", data={"token": grant.refresh_token, "client_id": grant.client_id}
    )
    assert revoked.status_code == 200
    after = await http.post(server.mcp_url, json=INITIALIZE, headers=bearer)
    assert after.status_code == 401
    assert (await refresh(http, server, grant)).status_code == 400


def tool_call(name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}}


async def test_the_admin_tool_asks_for_more_scope_with_403(http, server):
    grant = await sign_in(http, server, "hana")
    async with mcp_client(server.mcp_url, grant.access_token) as client:
        await client.call_tool("add_note", {"text": "keep"})
    bearer = {**MCP_HEADERS, "Authorization": f"Bearer {grant.access_token}"}
    answer = await http.post(server.mcp_url, json=tool_call("delete_all_notes"), headers=bearer)
    assert answer.status_code == 403
    fields = www_authenticate_fields(answer.headers["www-authenticate"])
    assert fields["error"] == "insufficient_scope"
    assert "notes:admin" in fields["scope"].split()
    assert fields["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    assert "call delete_all_notes by hana" not in server.log_lines()

    admin = await sign_in(http, server, "hana", scope="notes:read notes:write notes:admin")
    async with mcp_client(server.mcp_url, admin.access_token) as client:
        result = await client.call_tool("delete_all_notes", {})
        assert not result.is_error
        assert (await client.call_tool("list_notes", {})).structured_content == {"result": []}
    assert "call delete_all_notes by hana" in server.log_lines()


async def test_a_confidential_client_authenticates_with_basic_or_post(http, server):
    for method in ("client_secret_basic", "client_secret_post"):
        client = await register(http, server, token_endpoint_auth_method=method)
        verifier, challenge = pkce_pair()
        location = await sign_in_as(authorize_url(server, client["client_id"], challenge), "ivan")
        form = {
            "grant_type": "authorization_code",
            "code": redirect_fields(location)["code"],
            "redirect_uri": LOOPBACK_CALLBACK,
            "code_verifier": verifier,
        }
        if method == "client_secret_basic":
            secret = base64.b64encode(f"{client['client_id']}:{client['client_secret']}".encode()).decode()
            answer = await http.post(
                f"{server.issuer}/token", data=form, headers={"Authorization": f"Basic {secret}"}
            )
        else:
            no_secret = await http.post(
                f"{server.issuer}/token", data={**form, "client_id": client["client_id"]}
            )
            assert no_secret.status_code == 401
            form |= {"client_id": client["client_id"], "client_secret": client["client_secret"]}
            answer = await http.post(f"{server.issuer}/token", data=form)
        assert answer.status_code == 200, (method, answer.text)


async def test_a_client_id_metadata_url_is_accepted_with_a_loopback_redirect_only(http, server):
    client_id = "https://nerve.example/oauth/client.json"
    verifier, challenge = pkce_pair()
    location = await sign_in_as(authorize_url(server, client_id, challenge), "judy")
    code = redirect_fields(location)["code"]
    answer = await exchange(http, server, client_id, code, verifier)
    assert answer.status_code == 200, answer.text

    page = await http.get(
        authorize_url(server, client_id, challenge, redirect_uri="https://nerve.example/cb")
    )
    assert page.status_code == 400


async def test_a_trusted_client_metadata_document_gives_its_own_redirect_uris(http, server):
    verifier, challenge = pkce_pair()
    url = authorize_url(server, TRUSTED_CLIENT_ID, challenge, redirect_uri=TRUSTED_CALLBACK)
    page = await http.get(url)
    assert "nerve on Slack" in page.text
    location = await sign_in_as(url, "kim")
    assert location.startswith(TRUSTED_CALLBACK + "?")
    answer = await http.post(
        f"{server.issuer}/token",
        data={
            "grant_type": "authorization_code",
            "code": redirect_fields(location)["code"],
            "redirect_uri": TRUSTED_CALLBACK,
            "client_id": TRUSTED_CLIENT_ID,
            "code_verifier": verifier,
        },
    )
    assert answer.status_code == 200, answer.text
    loopback = await http.get(authorize_url(server, TRUSTED_CLIENT_ID, challenge))
    assert loopback.status_code == 400  # a trusted document's redirect_uris are the only ones


async def test_a_restart_with_a_state_file_keeps_tokens_and_notes(tmp_path, http):
    state = tmp_path / "state.json"
    first = await start_server(tmp_path, "--port", "0", "--state", str(state))
    assert first.issuer == f"http://127.0.0.1:{first.port}"  # one port serves both roles by default
    try:
        grant = await sign_in(http, first, "lena")
        async with mcp_client(first.mcp_url, grant.access_token) as client:
            await client.call_tool("add_note", {"text": "survives"})
    finally:
        assert await stop_server(first) == 0

    second = await start_server(
        tmp_path, "--port", str(first.port), "--state", str(state), "--token-lifetime", "1"
    )
    try:
        async with mcp_client(second.mcp_url, grant.access_token) as client:
            assert (await client.call_tool("list_notes", {})).structured_content == {"result": ["survives"]}
        answer = await refresh(http, second, grant)
        assert answer.status_code == 200, answer.text
        assert answer.json()["expires_in"] == 1
        short_lived = {**MCP_HEADERS, "Authorization": f"Bearer {answer.json()['access_token']}"}
        await asyncio.sleep(2.2)
        expired = await http.post(second.mcp_url, json=INITIALIZE, headers=short_lived)
        assert expired.status_code == 401
        assert www_authenticate_fields(expired.headers["www-authenticate"])["error"] == "invalid_token"
    finally:
        await stop_server(second)


class MemoryTokens:
    """What the SDK's OAuth client keeps between requests, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def sdk_oauth(
    server: RunningServer, user: str, *, client_metadata_url: str | None = None
) -> tuple[OAuthClientProvider, list[str]]:
    """The `mcp` SDK's own OAuth client, whose browser signs in as `user`, and the redirects it got."""
    redirects: list[str] = []

    async def open_browser(url: str) -> None:
        redirects.append(await sign_in_as(url, user))

    async def callback() -> AuthorizationCodeResult:
        fields = redirect_fields(redirects[-1])
        return AuthorizationCodeResult(code=fields["code"], state=fields.get("state"), iss=fields.get("iss"))

    oauth = OAuthClientProvider(
        server.mcp_url,
        OAuthClientMetadata(redirect_uris=[AnyUrl(LOOPBACK_CALLBACK)], client_name="nerve test"),
        MemoryTokens(),
        redirect_handler=open_browser,
        callback_handler=callback,
        client_metadata_url=client_metadata_url,
    )
    return oauth, redirects


@pytest.mark.parametrize("client_metadata_url", [None, "https://nerve.example/oauth/client.json"])
async def test_the_sdk_oauth_client_discovers_signs_in_and_steps_up(server, client_metadata_url):
    oauth, sign_ins = sdk_oauth(server, "mona", client_metadata_url=client_metadata_url)
    async with (
        httpx2.AsyncClient(auth=oauth, timeout=15) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http), mode="legacy") as client,  # type: ignore[arg-type]
    ):
        assert text_of(await client.call_tool("whoami", {})) == "mona"
        assert len(sign_ins) == 1
        result = await client.call_tool("delete_all_notes", {})
        assert not result.is_error, text_of(result)
        assert len(sign_ins) == 2  # the 403 made it sign in again, asking for more
    granted = oauth.context.current_tokens
    assert granted is not None and granted.scope is not None
    assert {"notes:read", "notes:write", "notes:admin"} <= set(granted.scope.split())
    assert "call delete_all_notes by mona" in server.log_lines()
