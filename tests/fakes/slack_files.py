"""Slack's side of files people share, for the fake Slack (`tests.fakes.slack_api`): `files.info`
and the private file URLs, both behind the bot token.

`host(name, data, mime)` keeps a file and returns the object Slack puts in an event's `files`, its
`url_private(_download)` on the fake's own address. A download with the right `Authorization: Bearer`
gets the bytes (chunked, no Content-Length, as a big file streams); no token is 401, a wrong one 403;
without the `files:read` scope (when the fake's scopes are set) Slack's sign-in page comes back,
HTML with 200, as the real one answers. Every download is recorded, whether it was let through or not.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TEAM_ID = "T0000TEAM"
FILES_SCOPE = "files:read"


@dataclass(slots=True)
class HostedFile:
    id: str
    name: str
    mime: str
    data: bytes
    # The size files.info and the event declare (the real length unless a test says otherwise).
    size: int
    # Where a download is sent instead (a 302), for the redirect tests.
    redirect: str | None = None


@dataclass(frozen=True, slots=True)
class Download:
    """One request for a file's bytes, as the fake received it."""

    file_id: str
    path: str
    # The bearer token was the bot's.
    authorized: bool
    status: int


@dataclass(eq=False)
class FakeFiles:
    """The files of the fake workspace; `token` is the bot token downloads and files.info must carry."""

    base: Callable[[], str]
    token: str = "xoxb-test-token"
    hosted: dict[str, HostedFile] = field(default_factory=dict)
    downloads: list[Download] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def host(
        self,
        name: str,
        data: bytes,
        mime: str,
        *,
        size: int | None = None,
        redirect: str | None = None,
    ) -> dict[str, Any]:
        """Keep a file; the object an event's `files` holds for it."""
        file_id = f"F{next(self._ids):08d}"
        self.hosted[file_id] = HostedFile(
            id=file_id,
            name=name,
            mime=mime,
            data=data,
            size=len(data) if size is None else size,
            redirect=redirect,
        )
        return self.described(file_id)

    def described(self, file_id: str) -> dict[str, Any]:
        """The file as Slack describes it (in an event, or in files.info)."""
        hosted = self.hosted[file_id]
        private = f"{self.base()}/files-pri/{TEAM_ID}-{file_id}/{hosted.name}"
        return {
            "id": file_id,
            "created": 1600000000,
            "name": hosted.name,
            "title": hosted.name,
            "mimetype": hosted.mime,
            "filetype": hosted.name.rsplit(".", 1)[-1],
            "user": "U0ALICE",
            "size": hosted.size,
            "mode": "hosted",
            "is_external": False,
            "url_private": private,
            "url_private_download": f"{self.base()}/files-pri/{TEAM_ID}-{file_id}/download/{hosted.name}",
            "permalink": f"https://nerve-test.slack.com/files/U0ALICE/{file_id}/{hosted.name}",
            "thumb_64": f"{self.base()}/files-tmb/{TEAM_ID}-{file_id}/thumb_64",
        }

    @staticmethod
    def id_only(described: dict[str, Any]) -> dict[str, Any]:
        """The entry some `file_share` events carry instead: an id to ask files.info about."""
        return {"id": described["id"], "mode": "file_access", "file_access": "check_file_info"}

    def authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    def info(self, body: dict[str, Any], request: web.Request, scopes: list[str] | None) -> dict[str, Any]:
        """files.info, behind the bot token and (when the fake's scopes are set) files:read."""
        if not self.authorized(request):
            return {"ok": False, "error": "invalid_auth"}
        if scopes is not None and FILES_SCOPE not in scopes:
            return {"ok": False, "error": "missing_scope", "needed": FILES_SCOPE}
        file_id = str(body.get("file") or "")
        if file_id not in self.hosted:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": self.described(file_id)}

    def routes(self, app: web.Application, scopes: Callable[[], list[str] | None]) -> None:
        async def serve(request: web.Request) -> web.StreamResponse:
            return await self._serve(request, scopes())

        app.router.add_get("/files-pri/{team_file}/{rest:.*}", serve)

    async def _serve(self, request: web.Request, scopes: list[str] | None) -> web.StreamResponse:
        file_id = request.match_info["team_file"].removeprefix(f"{TEAM_ID}-")
        hosted = self.hosted.get(file_id)
        authorized = self.authorized(request)
        if "Authorization" not in request.headers:
            status = 401
        elif not authorized:
            status = 403
        elif hosted is None:
            status = 404
        elif hosted.redirect is not None:
            status = 302
        else:
            status = 200
        self.downloads.append(
            Download(file_id=file_id, path=request.path, authorized=authorized, status=status)
        )
        if status == 302 and hosted is not None and hosted.redirect is not None:
            raise web.HTTPFound(hosted.redirect)
        if status != 200 or hosted is None:
            return web.Response(status=status, text="no")
        if scopes is not None and FILES_SCOPE not in scopes:
            return web.Response(text="<html>Sign in to Slack</html>", content_type="text/html")
        response = web.StreamResponse(headers={"Content-Type": hosted.mime})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(hosted.data), 16 * 1024):
            await response.write(hosted.data[start : start + 16 * 1024])
        await response.write_eof()
        return response
