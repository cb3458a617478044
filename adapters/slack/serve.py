"""`nerve slack`: run the bot until stopped, over Socket Mode or the Events API over HTTP.

Start-up checks the tokens with Slack, answers what was left unfinished before a restart, starts the
sweep, then serves deliveries. "Add to Slack" needs a browser to reach nerve in both modes: over HTTP
its pages sit beside `/slack/events`; in Socket Mode, which has no events endpoint, beside `/healthz`
on the operations port, and nothing there accepts an event.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.request.async_request import AsyncBoltRequest

from adapters.http_log import serve_app
from adapters.jobs_runtime import drained
from adapters.oauth_http import sign_in_endpoints
from adapters.ops_http import OpsEndpoints, PlatformLink, always
from adapters.slack.app import SWEEP_SECONDS, SlackBot, running
from adapters.slack.client import reaching_slack, require_bot_token
from adapters.slack.installs import INSTALL_PATH, REDIRECT_PATH, oauth_on
from adapters.slack.settings import SlackSettings
from adapters.slack.socket_mode import socket_mode_handler
from adapters.slack.well_formed import delivery_problem, signature_problem
from adapters.up_line import log_up
from bot.agent import Agent
from bot.errors import ConfigError

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


def check_settings(settings: SlackSettings) -> None:
    if not oauth_on(settings):  # with "Add to Slack", each workspace's token comes with its install
        require_bot_token(settings)
    if settings.slack_app_token is None and settings.slack_signing_secret is None:
        raise ConfigError(
            "set SLACK_APP_TOKEN (xapp-…, for Socket Mode) or SLACK_SIGNING_SECRET (for Events API over HTTP)"
        )


async def serve_http(
    bot: SlackBot, host: str, port: int, ops: OpsEndpoints | None = None
) -> tuple[web.AppRunner, str]:
    """Serve the Events API (and `ops`) at `host:port`; returns the runner and the events URL bound."""
    secret = bot.signing_secret
    if secret is None:
        raise ConfigError("SLACK_SIGNING_SECRET is not set: it is needed to receive events over HTTP")

    async def events(request: web.Request) -> web.Response:
        raw = await request.read()
        stamp = request.headers.get("X-Slack-Request-Timestamp")
        signature = request.headers.get("X-Slack-Signature")
        problem = signature_problem(secret, raw, stamp, signature, now=time.time())
        if problem is not None:
            logger.warning("refused a delivery from %s, bad Slack signature: %s", request.remote, problem)
            return web.json_response({"error": "invalid request"}, status=401)
        # Slack sends UTF-8; anything else is decoded with replacement rather than dropped with a 500.
        text = raw.decode("utf-8", "replace")
        malformed = delivery_problem(text, request.content_type)
        if malformed is not None:
            logger.warning("refused a signed Slack delivery that is not well-formed: %s", malformed)
            return web.json_response({"error": "malformed request"}, status=400)
        bolt_request = AsyncBoltRequest(
            body=text,
            query=request.query_string,
            headers=request.headers,  # type: ignore[arg-type]
        )
        return await to_aiohttp_response(await bot.app.async_dispatch(bolt_request))

    web_app = web.Application()
    web_app.router.add_post(EVENTS_PATH, events)
    if bot.app.oauth_flow is not None:
        InstallPages(bot.app.oauth_flow).routes(web_app)
    if ops is not None:
        ops.install(web_app)
    runner, url = await serve_app(web_app, host, port)
    return runner, f"{url}{EVENTS_PATH}"


class InstallPages:
    """ "Add to Slack" (SLACK_CLIENT_ID): Bolt's install and redirect pages, the state checked by Bolt.

    In Socket Mode the operations server starts before the bot, so its flow is given once the bot is
    built; until then the pages answer 503."""

    def __init__(self, flow: AsyncOAuthFlow | None = None) -> None:
        self.flow = flow

    def routes(self, web_app: web.Application) -> None:
        web_app.router.add_get(INSTALL_PATH, self._install)
        web_app.router.add_get(REDIRECT_PATH, self._redirect)

    async def _install(self, request: web.Request) -> web.Response:
        if self.flow is None:
            return _starting()
        return await to_aiohttp_response(await self.flow.handle_installation(_bolt_request(request)))

    async def _redirect(self, request: web.Request) -> web.Response:
        if self.flow is None:
            return _starting()
        return await to_aiohttp_response(await self.flow.handle_callback(_bolt_request(request)))


def _bolt_request(request: web.Request) -> AsyncBoltRequest:
    return AsyncBoltRequest(body="", query=request.query_string, headers=request.headers)  # type: ignore[arg-type]


def _starting() -> web.Response:
    return web.Response(
        status=503, text="nerve is starting; try again in a moment", headers={"Retry-After": "5"}
    )


async def run_slack(
    agent: Agent,
    settings: SlackSettings,
    *,
    host: str | None = None,
    ready: asyncio.Future[str] | None = None,
    sweep_interval: float = SWEEP_SECONDS,
    ops_ready: asyncio.Future[str] | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run over Socket Mode or HTTP until cancelled, or until `stop` is set and the running turns had
    their grace. `ready` receives "socket-mode" or the events URL once deliveries can arrive."""
    check_settings(settings)
    bind = host or settings.nerve_http_host
    stop = stop or asyncio.Event()
    ops = OpsEndpoints(agent, PlatformLink("Slack"), ready=ops_ready, stopping=stop)
    # The browser's way back after signing in, on the same port in every mode.
    sign_ins = sign_in_endpoints(agent, settings.nerve_public_url, "Slack")
    if sign_ins is not None:
        ops.routes.append(sign_ins.install)
    alone = settings.slack_app_token is not None
    pages = InstallPages()
    if alone and oauth_on(settings):
        ops.routes.append(pages.routes)
    async with running(agent, settings, ops, bind, alone=alone, sign_ins=sign_ins) as (bot, jobs):
        pages.flow = bot.app.oauth_flow
        recovered = await bot.recover()
        if recovered:
            logger.warning(
                "answering %d Slack event(s) or approval(s) left unfinished before the restart", recovered
            )
        bot.start_sweeper(sweep_interval)
        bot.start_schedules()
        if settings.slack_app_token is not None:
            app_token = settings.slack_app_token.get_secret_value()
            # Asked here so a refused app token stops the start; the SDK would retry it forever.
            async with reaching_slack(settings, "SLACK_APP_TOKEN"):
                opened = await bot.client.apps_connections_open(app_token=app_token)
            handler = socket_mode_handler(bot.app, app_token, bot.client)
            handler.client.wss_uri = str(opened["url"])
            await handler.connect_async()  # type: ignore[no-untyped-call]
            ops.platform.connected(handler.client.is_connected)
            if bot.oauth is None:
                me = await bot.identity()
                log_up("Slack: Socket Mode connected as @%s (%s)", me.name, me.user_id)
            else:  # each workspace's bot has its own identity, known from its install
                public = (settings.nerve_public_url or "").rstrip("/") or "(NERVE_PUBLIC_URL unset)"
                log_up("Slack: Socket Mode connected; Add to Slack at %s%s", public, INSTALL_PATH)
            where, close = "socket-mode", handler.close_async
        else:
            ops.platform.connected(always)
            runner, where = await serve_http(bot, bind, settings.nerve_http_port, ops)
            ops.announce(where.removesuffix(EVENTS_PATH))
            log_up("serving Slack events and interactions at %s", where)
            close = runner.cleanup
        try:
            if ready is not None and not ready.done():
                ready.set_result(where)
            await stop.wait()
            await drained(bot, jobs, settings.nerve_shutdown_grace)
        finally:
            await close()  # type: ignore[no-untyped-call]
