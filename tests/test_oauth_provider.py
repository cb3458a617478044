"""nerve's OAuth client (`bot.mcp.auth.provider`) and its loopback sign-in (`bot.mcp.auth.loopback`).

Against the real OAuth-protected notes server (its own authorization server, a subprocess on
loopback): a sign-in through the loopback callback carries the person into nerve's calls, a tool that
needs more scope makes nerve sign in again for it, nerve's Client ID Metadata Document and a client
the operator registered beforehand are used instead of registering. Without a server: the loopback
callback turns away answers that are not for the sign-in under way, the authorization URL is the one
the SDK would send, and a server that keeps refusing gets no further sign-in.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlparse

import httpx2
import pytest
import pytest_asyncio
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.shared.auth import (
    OAuthClientInformationFull,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)

from bot.errors import SignInError
from bot.mcp.auth.loopback import LoopbackSignIn
from bot.mcp.auth.memory import MemoryTokens
from bot.mcp.auth.provider import (
    NerveOAuth,
    auth_for,
    client_metadata_document,
    client_metadata_url,
    registration_method,
)
from bot.mcp.host import MCPHost
from bot.mcp.server_config import AuthConfig, ServerConfig
from servers.notes_oauth.sign_in import sign_in_as
from tests.test_notes_oauth_server import RunningServer, start_server, stop_server

PUBLIC_URL = "https://nerve.example"
OAUTH = AuthConfig(type="oauth", identity="bot")
_LINK = re.compile(r"(https?://\S+)$")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def notes(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[RunningServer]:
    """The notes server; it trusts nerve's Client ID Metadata Document (it never fetches one)."""
    tmp = tmp_path_factory.mktemp("notes")
    document = tmp / "client.json"
    document.write_text(json.dumps(client_metadata_document(PUBLIC_URL)))
    trust = f"{client_metadata_url(PUBLIC_URL)}={document}"
    server = await start_server(tmp, "--port", "0", "--issuer-port", "0", "--trust-client-metadata", trust)
    try:
        yield server
    finally:
        await stop_server(server)


class Person:
    """Plays the person at the browser: signs in as `user` at each link nerve shows, then lets the
    browser follow the redirect back to nerve's callback, and keeps the page it got there."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.links: list[str] = []
        self.pages: list[str] = []
        self._visits: set[asyncio.Task[None]] = set()

    def say(self, text: str) -> None:
        match = _LINK.search(text)
        if match is None:
            return
        self.links.append(match.group(1))
        visit = asyncio.get_running_loop().create_task(self._visit(match.group(1)))
        self._visits.add(visit)
        visit.add_done_callback(self._visits.discard)

    async def _visit(self, url: str) -> None:
        back = await sign_in_as(url, self.user)
        async with httpx2.AsyncClient(timeout=15) as browser:
            self.pages.append((await browser.get(back)).text)


def fields(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlparse(url).query).items()}


async def call_notes(
    notes: RunningServer, provider: NerveOAuth, tool: str, arguments: dict[str, object] | None = None
) -> str:
    """Connect nerve's host to the notes server signed in by `provider`, and call one tool."""
    servers = {
        "notes": ServerConfig(
            trustAnnotations=True, url=notes.mcp_url, allowPrivateNetwork=True, auth=OAUTH, approval="never"
        )
    }
    async with MCPHost(servers, auth=lambda _name, _config: provider) as host:
        async with asyncio.timeout(30):
            await host.wait_until_ready()
        (spec,) = [t for t in host.list_tools() if t.name.endswith(tool)]
        result = await host.call_tool(spec.name, arguments or {})
    assert not result.is_error, result.content
    return result.content


def signed_in_provider(
    notes: RunningServer,
    sign_in: LoopbackSignIn,
    tokens: MemoryTokens,
    config: AuthConfig = OAUTH,
    metadata_url: str | None = None,
) -> NerveOAuth:
    return NerveOAuth(
        notes.mcp_url,
        config,
        tokens,
        redirect_uri=sign_in.redirect_uri,
        client_metadata_url=metadata_url,
        redirect_handler=sign_in.redirect_handler,
        callback_handler=sign_in.callback_handler,
    )


async def test_a_loopback_sign_in_carries_the_person_into_the_calls(notes: RunningServer) -> None:
    person = Person("alice")
    tokens = MemoryTokens()
    async with LoopbackSignIn(say=person.say, open_browser=False) as sign_in:
        provider = signed_in_provider(notes, sign_in, tokens)
        assert json.loads(await call_notes(notes, provider, "whoami")) == {"result": "alice"}
    (link,) = person.links
    sent = fields(link)
    assert sent["redirect_uri"] == sign_in.redirect_uri
    assert sent["code_challenge_method"] == "S256" and sent["resource"] == notes.mcp_url
    # The challenge's scopes, and offline_access because this authorization server lists it.
    assert sent["scope"].split() == ["notes:read", "notes:write", "offline_access"]
    assert person.pages and "Connected" in person.pages[0]
    # Registered as nerve, a public client (the server lists "none" among its methods).
    assert tokens.client_info is not None and tokens.client_info.client_name == "nerve"
    assert tokens.client_info.token_endpoint_auth_method == "none"
    assert tokens.tokens is not None and tokens.tokens.refresh_token


async def test_a_tool_that_needs_more_scope_signs_in_again_for_it(notes: RunningServer) -> None:
    person = Person("bob")
    async with LoopbackSignIn(say=person.say, open_browser=False) as sign_in:
        provider = signed_in_provider(notes, sign_in, MemoryTokens())
        await call_notes(notes, provider, "delete_all_notes")
    first, second = person.links
    assert "notes:admin" not in fields(first)["scope"].split()
    # Step-up asks for the new scope together with those granted before (SEP-2350).
    assert {"notes:read", "notes:write", "notes:admin"} <= set(fields(second)["scope"].split())
    assert provider.last_failure is None


async def test_nerves_client_metadata_document_is_its_client_id(notes: RunningServer) -> None:
    person = Person("carol")
    tokens = MemoryTokens()
    metadata_url = client_metadata_url(PUBLIC_URL)
    assert metadata_url == "https://nerve.example/oauth/client.json"
    async with LoopbackSignIn(say=person.say, open_browser=False) as sign_in:
        provider = signed_in_provider(notes, sign_in, tokens, metadata_url=metadata_url)
        assert json.loads(await call_notes(notes, provider, "whoami")) == {"result": "carol"}
    assert fields(person.links[0])["client_id"] == metadata_url
    assert tokens.client_info is not None and tokens.client_info.client_id == metadata_url


async def test_a_client_registered_beforehand_is_used_as_configured(notes: RunningServer) -> None:
    person = Person("dave")
    tokens = MemoryTokens()
    async with (
        httpx2.AsyncClient(timeout=15) as http,
        LoopbackSignIn(say=person.say, open_browser=False) as sign_in,
    ):
        registered = await http.post(
            f"{notes.issuer}/register",
            json={
                "redirect_uris": [sign_in.redirect_uri],
                "client_name": "ops",
                "token_endpoint_auth_method": "none",
            },
        )
        client_id = registered.json()["client_id"]
        config = AuthConfig(type="oauth", identity="bot", client_id=client_id)
        provider = signed_in_provider(notes, sign_in, tokens, config, client_metadata_url(PUBLIC_URL))
        assert json.loads(await call_notes(notes, provider, "whoami")) == {"result": "dave"}
    # Before the metadata document the server accepts, and without registering anew.
    assert fields(person.links[0])["client_id"] == client_id
    assert tokens.client_info is None


async def test_the_loopback_callback_only_takes_the_answer_for_the_sign_in_under_way() -> None:
    async with (
        LoopbackSignIn(say=lambda _text: None, open_browser=False, wait=10) as sign_in,
        httpx2.AsyncClient(timeout=10) as browser,
    ):
        await sign_in.redirect_handler("http://as.example/authorize?state=current")
        stale = await browser.get(f"{sign_in.redirect_uri}?code=old&state=earlier")
        assert stale.status_code == 400 and "no longer in use" in stale.text
        elsewhere = await browser.get(sign_in.redirect_uri.replace("/callback", "/favicon.ico"))
        assert elsewhere.status_code == 404
        page = await browser.get(f"{sign_in.redirect_uri}?code=abc&state=current&iss=http%3A%2F%2Fas.example")
        assert page.status_code == 200 and "Connected" in page.text
        result = await sign_in.callback_handler()
    assert result == AuthorizationCodeResult(code="abc", state="current", iss="http://as.example")


async def test_a_refused_sign_in_is_a_sign_in_error_with_the_servers_reason() -> None:
    async with (
        LoopbackSignIn(say=lambda _text: None, open_browser=False, wait=10) as sign_in,
        httpx2.AsyncClient(timeout=10) as browser,
    ):
        await sign_in.redirect_handler("http://as.example/authorize?state=s1")
        page = await browser.get(
            f"{sign_in.redirect_uri}?error=access_denied&error_description=the+person+declined&state=s1"
        )
        assert "not completed" in page.text
        with pytest.raises(SignInError, match="the person declined"):
            await sign_in.callback_handler()


async def test_a_sign_in_nobody_finishes_ends_with_a_sign_in_error() -> None:
    async with LoopbackSignIn(say=lambda _text: None, open_browser=False, wait=0.2) as sign_in:
        await sign_in.redirect_handler("http://as.example/authorize?state=s1")
        with pytest.raises(SignInError, match=r"within 0\.2 s"):
            await sign_in.callback_handler()


def discovered(provider: OAuthClientProvider) -> None:
    """What discovery and registration leave in the context before an authorization."""
    context = provider.context
    context.oauth_metadata = OAuthMetadata.model_validate(
        {
            "issuer": "https://as.example",
            "authorization_endpoint": "https://as.example/authorize",
            "token_endpoint": "https://as.example/token",
        }
    )
    context.protected_resource_metadata = ProtectedResourceMetadata.model_validate(
        {"resource": "https://mcp.example/mcp", "authorization_servers": ["https://as.example"]}
    )
    context.client_info = OAuthClientInformationFull(client_id="nerve-client", redirect_uris=None)
    context.client_metadata.scope = "notes:read offline_access"


async def test_the_authorization_url_is_the_one_the_sdk_sends() -> None:
    redirect_uri = "http://127.0.0.1:9/callback"
    ours = NerveOAuth("https://mcp.example/mcp", OAUTH, MemoryTokens(), redirect_uri=redirect_uri)
    discovered(ours)
    shown: list[str] = []

    async def show(url: str) -> None:
        shown.append(url)

    async def never_back() -> AuthorizationCodeResult:
        raise SignInError("stop here")

    sdk = OAuthClientProvider(
        "https://mcp.example/mcp",
        ours.context.client_metadata.model_copy(deep=True),
        MemoryTokens(),
        redirect_handler=show,
        callback_handler=never_back,
    )
    discovered(sdk)
    with pytest.raises(SignInError):
        await sdk._perform_authorization_code_grant()
    request = ours.authorization_request()
    theirs, mine = fields(shown[0]), fields(request.url)
    assert urlparse(request.url).path == urlparse(shown[0]).path
    for fresh in ("state", "code_challenge"):
        assert theirs.pop(fresh) != mine.pop(fresh)
    assert mine == theirs
    assert mine["prompt"] == "consent" and mine["resource"] == "https://mcp.example/mcp"
    # The browser's answer: only with this sign-in's state and the server's issuer.
    back = AuthorizationCodeResult(code="c", state=request.state, iss="https://as.example")
    assert ours.authorization_code(request, back) == "c"
    for wrong in ({"state": "other"}, {"iss": "https://as.example/"}):
        with pytest.raises(Exception, match="mismatch"):
            ours.authorization_code(request, back.model_copy(update=wrong))


async def refused_after(scope_granted: str, challenge: str) -> tuple[httpx2.Request | None, NerveOAuth]:
    """Feed the provider a 403 for a token granted `scope_granted`, as the HTTP client would; the
    request the flow makes next (None: the 403 is final)."""
    tokens = MemoryTokens()
    tokens.tokens = OAuthToken(access_token="granted", scope=scope_granted)
    provider = NerveOAuth("http://mcp.example/mcp", OAUTH, tokens, redirect_uri="http://127.0.0.1:9/callback")
    request = httpx2.Request("POST", "http://mcp.example/mcp", json={})
    flow = provider.async_auth_flow(request)
    sent = await flow.__anext__()
    assert sent.headers["Authorization"] == "Bearer granted"
    refusal = httpx2.Response(
        403,
        headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{challenge}"'},
        request=sent,
    )
    try:
        return await flow.asend(refusal), provider
    except StopAsyncIteration:
        return None, provider
    finally:
        await flow.aclose()


async def test_no_sign_in_for_scopes_the_token_already_has() -> None:
    following, provider = await refused_after("notes:read notes:admin", "notes:admin")
    assert following is None
    assert isinstance(provider.last_failure, SignInError)
    assert "although those scopes were granted" in str(provider.last_failure)
    # A scope the token lacks is worth a sign-in: discovery starts.
    following, provider = await refused_after("notes:read", "notes:admin")
    assert following is not None and following.url.path.startswith("/.well-known/")
    assert provider.last_failure is None


@dataclass
class Walk:
    """What the provider sent to a server that lists `methods` and names no scope anywhere."""

    registration: dict[str, object]
    authorization_url: str


async def walk_to_sign_in(config: AuthConfig, methods: list[str]) -> Walk:
    """Answer the provider's discovery and registration as such a server would, up to the sign-in."""
    shown: list[str] = []

    async def show(url: str) -> None:
        shown.append(url)

    async def nobody_comes_back() -> AuthorizationCodeResult:
        raise SignInError("stop at the sign-in")

    provider = NerveOAuth(
        "https://mcp.example/mcp",
        config,
        MemoryTokens(),
        redirect_uri="http://127.0.0.1:9/callback",
        redirect_handler=show,
        callback_handler=nobody_comes_back,
    )
    answers = {
        "/.well-known/oauth-protected-resource/mcp": {
            "resource": "https://mcp.example/mcp",
            "authorization_servers": ["https://as.example"],
        },
        "/.well-known/oauth-authorization-server": {
            "issuer": "https://as.example",
            "authorization_endpoint": "https://as.example/authorize",
            "token_endpoint": "https://as.example/token",
            "registration_endpoint": "https://as.example/register",
            "token_endpoint_auth_methods_supported": methods,
        },
    }
    flow = provider.async_auth_flow(httpx2.Request("POST", "https://mcp.example/mcp", json={}))
    sent = await flow.__anext__()
    response = httpx2.Response(401, headers={"WWW-Authenticate": "Bearer"}, request=sent)
    registration: dict[str, object] = {}
    with pytest.raises(SignInError, match="stop at the sign-in"):
        for _ in range(5):
            sent = await flow.asend(response)
            if sent.method == "POST":
                assert sent.url == httpx2.URL("https://as.example/register")
                registration = dict(json.loads(sent.content))
                method = registration["token_endpoint_auth_method"]
                client = {"client_id": "c1", "token_endpoint_auth_method": method}
                if method != "none":
                    client["client_secret"] = "s1"
                response = httpx2.Response(201, json=client, request=sent)
            else:
                response = httpx2.Response(200, json=answers[sent.url.path], request=sent)
    await flow.aclose()
    (url,) = shown
    return Walk(registration, url)


async def test_a_registration_asks_for_the_method_the_server_takes() -> None:
    walk = await walk_to_sign_in(OAUTH, ["client_secret_post"])
    assert walk.registration["token_endpoint_auth_method"] == "client_secret_post"
    assert walk.registration["client_name"] == "nerve" and walk.registration["application_type"] == "native"
    assert walk.registration["grant_types"] == ["authorization_code", "refresh_token"]
    walk = await walk_to_sign_in(OAUTH, ["client_secret_basic", "none"])
    assert walk.registration["token_endpoint_auth_method"] == "none"
    # The operator's choice stands.
    chosen = AuthConfig(type="oauth", identity="bot", token_endpoint_auth_method="client_secret_basic")
    walk = await walk_to_sign_in(chosen, ["none"])
    assert walk.registration["token_endpoint_auth_method"] == "client_secret_basic"


async def test_the_operators_scope_only_where_the_server_names_none() -> None:
    walk = await walk_to_sign_in(OAUTH, ["none"])
    assert "scope" not in fields(walk.authorization_url)
    configured = AuthConfig(type="oauth", identity="bot", scope="notes:read")
    walk = await walk_to_sign_in(configured, ["none"])
    assert fields(walk.authorization_url)["scope"] == "notes:read"


def test_a_registration_asks_for_a_method_the_server_lists() -> None:
    assert registration_method(None) == "none"
    assert registration_method(["client_secret_basic", "none"]) == "none"
    assert registration_method(["client_secret_post"]) == "client_secret_post"
    assert registration_method(["private_key_jwt", "client_secret_basic"]) == "client_secret_basic"


def test_client_credentials_get_the_sdks_machine_provider() -> None:
    config = AuthConfig(type="client_credentials", client_id="nerve", client_secret="s")
    auth = auth_for(
        "http://mcp.example/mcp", config, MemoryTokens(), redirect_uri="http://127.0.0.1:9/callback"
    )
    assert not isinstance(auth, NerveOAuth)
    assert isinstance(auth, OAuthClientProvider) and auth.context.client_metadata.grant_types == [
        "client_credentials"
    ]


def test_the_client_metadata_document_names_itself() -> None:
    document = client_metadata_document(PUBLIC_URL + "/")
    assert document["client_id"] == "https://nerve.example/oauth/client.json"
    # The public callback, and the loopback one of the terminal and `nerve connect` (any port, RFC 8252).
    assert document["redirect_uris"] == ["https://nerve.example/oauth/callback", "http://127.0.0.1/callback"]
    assert document["grant_types"] == ["authorization_code", "refresh_token"]
    assert document["token_endpoint_auth_method"] == "none" and document["application_type"] == "web"
    # Authorization servers fetch documents over https only: a plain-http nerve has none.
    assert client_metadata_url("http://localhost:3000") is None
