"""Who may ask for a sign-in: registered clients and clients named by a metadata document URL (CIMD).

Three kinds of client_id are accepted:
- one issued by dynamic client registration (RFC 7591): its redirect_uri must be one it registered;
  a loopback one may differ in port only (RFC 8252 §7.3), as native apps pick a free port;
- an https URL listed with `--trust-client-metadata URL=FILE`: FILE holds the document that URL would
  serve, and its redirect_uris are the ones accepted;
- any other https URL with a path: the server never fetches it (tests run offline), and accepts it as
  a public client whose redirect_uri is a loopback address or one given with `--allow-redirect-uri`.

Any client may ask for any supported scope, whatever it registered: a step-up for `notes:admin` must
not fail because the registration named fewer scopes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from mcp.shared.auth import InvalidRedirectUriError, InvalidScopeError, OAuthClientInformationFull
from pydantic import AnyUrl, Field, ValidationError

from servers.notes_oauth import scopes
from servers.notes_oauth.store import NotesStore

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})

RedirectRule = Literal["registered", "loopback"]


class ClientMetadataError(Exception):
    """A --trust-client-metadata document that cannot be used."""


class NotesClient(OAuthClientInformationFull):
    """A client as the authorization endpoints see it: with this server's redirect and scope rules."""

    redirect_rule: RedirectRule = "registered"
    extra_redirect_uris: list[str] = Field(default_factory=list)

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        if requested_scope is None or not requested_scope.strip():
            return None
        requested = requested_scope.split()
        unknown = [scope for scope in requested if scope not in scopes.SUPPORTED]
        if unknown:
            raise InvalidScopeError(
                f"unknown scope {', '.join(unknown)}; this server knows {' '.join(scopes.SUPPORTED)}"
            )
        return requested

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        if redirect_uri is None:
            if self.redirect_rule == "registered" and self.redirect_uris and len(self.redirect_uris) == 1:
                return self.redirect_uris[0]
            raise InvalidRedirectUriError("redirect_uri is required")
        wanted = str(redirect_uri)
        if wanted in self.extra_redirect_uris:
            return redirect_uri
        if self.redirect_rule == "loopback":
            if _is_loopback(wanted):
                return redirect_uri
            raise InvalidRedirectUriError(
                f"redirect_uri {wanted} is not a loopback address, and this client's metadata document "
                "is not trusted with --trust-client-metadata"
            )
        if any(_same_redirect(wanted, str(registered)) for registered in self.redirect_uris or ()):
            return redirect_uri
        raise InvalidRedirectUriError(f"redirect_uri {wanted} is not registered for this client")


class ClientDirectory:
    """Finds the client behind a client_id: the registrations in the store, then metadata URLs."""

    def __init__(
        self,
        store: NotesStore,
        trusted_documents: Mapping[str, OAuthClientInformationFull],
        allowed_redirect_uris: Iterable[str] = (),
    ) -> None:
        self._store = store
        self._trusted = dict(trusted_documents)
        self._allowed_redirect_uris = list(allowed_redirect_uris)

    def find(self, client_id: str) -> NotesClient | None:
        registered = self._store.state.clients.get(client_id)
        if registered is not None:
            return NotesClient.model_validate(registered.model_dump(exclude_none=True))
        trusted = self._trusted.get(client_id)
        if trusted is not None:
            return NotesClient.model_validate(
                trusted.model_dump(exclude_none=True) | {"extra_redirect_uris": self._allowed_redirect_uris}
            )
        if is_metadata_url(client_id):
            return NotesClient(
                client_id=client_id,
                token_endpoint_auth_method="none",
                redirect_rule="loopback",
                extra_redirect_uris=self._allowed_redirect_uris,
            )
        return None


def is_metadata_url(client_id: str) -> bool:
    """A client_id that names a Client ID Metadata Document: https, a host, a path, no fragment."""
    parts = urlsplit(client_id)
    return (
        parts.scheme == "https"
        and bool(parts.hostname)
        and parts.path not in ("", "/")
        and not parts.fragment
        and parts.username is None
    )


def load_trusted_document(client_id: str, path: Path) -> OAuthClientInformationFull:
    """Read the metadata document `client_id` would serve from `path`, and check it names itself."""
    if not is_metadata_url(client_id):
        raise ClientMetadataError(f"{client_id} is not an https URL with a path, so it cannot name a client")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        client = OAuthClientInformationFull.model_validate(document)
    except (OSError, ValueError, ValidationError) as exc:
        raise ClientMetadataError(f"cannot read the client metadata document {path}: {exc}") from exc
    if client.client_id != client_id:
        raise ClientMetadataError(f"{path} says client_id {client.client_id!r}, not {client_id!r}")
    if client.token_endpoint_auth_method not in (None, "none"):
        raise ClientMetadataError(
            f"{path}: token_endpoint_auth_method {client.token_endpoint_auth_method!r} is not supported "
            "for metadata-document clients here; use 'none'"
        )
    if not client.redirect_uris:
        raise ClientMetadataError(f"{path} lists no redirect_uris")
    return client.model_copy(update={"token_endpoint_auth_method": "none", "client_secret": None})


def _is_loopback(uri: str) -> bool:
    parts = urlsplit(uri)
    return parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS


def _same_redirect(wanted: str, registered: str) -> bool:
    if wanted == registered:
        return True
    if not (_is_loopback(wanted) and _is_loopback(registered)):
        return False
    a, b = urlsplit(wanted), urlsplit(registered)
    return (a.hostname, a.path or "/", a.query) == (b.hostname, b.path or "/", b.query)
