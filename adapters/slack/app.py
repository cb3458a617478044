"""`nerve slack`: the bot on Slack with slack-bolt's AsyncApp (Socket Mode or Events API over HTTP).

The platform contract: every delivery is acked at once and answered in the background, exactly
once. A middleware claims each turn's `event_id` in the inbox *before* the ack, so a re-delivery
(Slack retries, a second Socket Mode connection) is acked and ignored, a delivery that never reached
us is processed when Slack retries it, and a turn cut short by a restart is answered at start-up.

On SIGTERM (`stop`), intake stops at once: `/readyz` answers 503, and a delivery that arrives now is
claimed and acked but left for the next start, which answers it. Running turns get
NERVE_SHUTDOWN_GRACE seconds to finish; the rest are cut off and answered at the next start too
(`adapters.slack.turns`). Nothing a person wrote is lost, and nothing is answered twice.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.common.commands import SLACK, command_on
from adapters.common.desk import AskDesk
from adapters.common.intake import Recorded, sweep, sweep_forever
from adapters.common.tasks import Owned
from adapters.http_log import quiet_runner
from adapters.jobs_runtime import drained, shared_jobs, work
from adapters.oauth_http import sign_in_endpoints
from adapters.ops_http import OpsEndpoints, PlatformLink, always
from adapters.slack.approval_view import ACTION_PATTERN
from adapters.slack.commands import (
    HELP,
    RESET_IN_CHANNEL,
    approvals_text,
    tools_text,
    unknown_command_text,
)
from adapters.slack.decisions import SlackApprovals, on_click
from adapters.slack.events import (
    DM_THREAD,
    PLATFORM,
    Identity,
    Turn,
    classify,
    is_dm_channel,
    place_of_command,
)
from adapters.slack.feedback import FeedbackStore, record_click
from adapters.slack.inbox import inbox_payload
from adapters.slack.input_view import ACTION_PATTERN as INPUT_ACTIONS
from adapters.slack.input_view import CALLBACK_ID as INPUT_FORM
from adapters.slack.inputs import InputClicks
from adapters.slack.intake import INTAKE_WAIT_SECONDS, left_to_sweep, unrecorded
from adapters.slack.jobs import Launcher, job_handlers
from adapters.slack.post import Poster
from adapters.slack.prompt_command import PromptCommand
from adapters.slack.rate_limits import CountedRateLimitHandler
from adapters.slack.render import FEEDBACK_ACTION
from adapters.slack.retries import ConnectionErrorRetries, ServerErrorRetries
from adapters.slack.settings import SlackSettings
from adapters.slack.sign_in import CONNECT_ACTIONS, DISCONNECT_ACTION, SlackSignIns
from adapters.slack.signature import signature_problem
from adapters.slack.socket_mode import socket_mode_handler
from adapters.slack.turns import TurnRunner
from adapters.slack.well_formed import delivery_problem
from adapters.up_line import log_up
from bot.agent import Agent
from bot.errors import ConfigError, StartupError, StoreError
from bot.jobs import JobHandler
from bot.mcp.auth.sign_ins import SignedIn
from bot.text.scrub import scrub_bytes
from bot.types import ConversationKey

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

logger = logging.getLogger(__name__)

# A `/nerve` sub-command's handler: the acknowledgement, the command's payload, its words.
SubCommand = Callable[[AsyncAck, dict[str, Any], list[str]], Awaitable[None]]
_FOLLOWED_MAX = 10_000
# Seconds a shutdown waits, after the grace, for answers that were already going out.
DELIVERY_ALLOWANCE = 5.0
# How often requests past their expiry are looked for; a request expires at most this late.
SWEEP_SECONDS = 15.0
SUGGESTED_PROMPTS = (
    {"title": "What can you do?", "message": "What can you do, and which tools do you have?"},
    {"title": "Check the environment", "message": "What is the environment status in my area?"},
)


def require_bot_token(settings: SlackSettings) -> str:
    if settings.slack_bot_token is None or not settings.slack_bot_token.get_secret_value():
        raise ConfigError(
            "SLACK_BOT_TOKEN is not set: copy the Bot User OAuth Token (xoxb-…) from your Slack app"
        )
    return settings.slack_bot_token.get_secret_value()


def make_client(settings: SlackSettings, **kwargs: Any) -> AsyncWebClient:
    """A Web API client that waits out 429s (Retry-After) and retries broken connections and server
    errors, except for a turn's posts, which are found again instead (`adapters.slack.retries`)."""
    return AsyncWebClient(
        token=require_bot_token(settings),
        base_url=settings.slack_api_base_url,
        retry_handlers=[
            ConnectionErrorRetries(max_retry_count=2),
            CountedRateLimitHandler(max_retry_count=3),
            ServerErrorRetries(max_retry_count=2),
        ],
        **kwargs,
    )


_REFUSED_TOKEN = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
    }
)


@asynccontextmanager
async def _reaching_slack(settings: SlackSettings, token_name: str) -> AsyncIterator[None]:
    """A start-up call to Slack: a refused token or an unreachable Slack becomes one actionable line."""
    where = f"Slack at {settings.slack_api_base_url} (SLACK_API_BASE_URL)"
    try:
        yield
    except SlackApiError as exc:
        error = exc.response.get("error") or f"HTTP {exc.response.status_code}"
        if error in _REFUSED_TOKEN:
            raise ConfigError(f"Slack refused {token_name} ({error})") from None
        raise StartupError(f"{where} answered {error}; is that the Slack Web API?") from None
    except (aiohttp.ClientError, SlackClientError, TimeoutError, OSError) as exc:
        raise StartupError(f"cannot reach {where}: {str(exc) or type(exc).__name__}") from None


class _DropTokenNotice(logging.Filter):
    """bolt warns that SLACK_BOT_TOKEN in the environment goes unused when it is given a client: the
    client carries that very token, so the warning is noise (and turns a start-up error into two lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


def _quiet_bolt_token_notice() -> None:
    bolt = logging.getLogger("slack_bolt.AsyncApp")
    if not any(isinstance(f, _DropTokenNotice) for f in bolt.filters):
        bolt.addFilter(_DropTokenNotice())


class SlackBot:
    """The AsyncApp plus what it needs: identity, owned background tasks, pacing and fallbacks."""

    def __init__(
        self,
        agent: Agent,
        settings: SlackSettings,
        client: AsyncWebClient,
        *,
        pace: float = 1.0,
        status_interval: float = 1.0,
        stream_interval: float = 0.4,
        feedback: FeedbackStore | None = None,
        jobs: TurnJobs | None = None,
    ) -> None:
        self.agent = agent
        self.settings = settings
        self.client = client
        self._poster = Poster(client, pace=pace)
        # Feedback buttons only where clicks can be kept: the store, when it keeps feedback.
        inbox = agent.inbox
        self._feedback = feedback or (inbox if isinstance(inbox, FeedbackStore) else None)
        self._sign_ins = SlackSignIns(
            agent.connections, self._poster, self.spawn, expires_in=settings.nerve_sign_in_timeout
        )
        self._turns = TurnRunner(
            agent,
            self._poster,
            status_interval=status_interval,
            stream_interval=stream_interval,
            feedback=self._feedback is not None,
            watch=self._sign_ins.watch,
        )
        self._owned = Owned()
        self._tasks = self._owned.tasks
        # Where turns run: jobs any process takes (PostgreSQL, `adapters.slack.jobs`), else tasks here.
        self._launch = Launcher(jobs, self.spawn)
        self._desk = AskDesk(
            agent, PLATFORM, SlackApprovals(self._poster), self._turns, self._launch, self.spawn
        )
        self._prompts = PromptCommand(agent, self._poster, self.identity, self._start_turn, self.spawn)
        self._inputs = InputClicks(agent, self._poster, self._desk.go_on, self.spawn)
        self._recorded = Recorded(agent, PLATFORM, self._launch, self._left_over, noun="Slack event")
        self._sweeper: asyncio.Task[None] | None = None
        self._followed: OrderedDict[ConversationKey, None] = OrderedDict()
        self._me: Identity | None = None
        self._stopping = False
        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
        self.signing_secret = secret
        _quiet_bolt_token_notice()
        self.app = AsyncApp(
            client=client,
            signing_secret=secret or "",
            # Socket Mode deliveries carry no signature; over HTTP, `serve_http` checks it on the raw
            # bytes before bolt sees the body (bolt's own check turns a malformed header into a 500).
            request_verification_enabled=False,
            # The listeners below only schedule work, so the ack still leaves within milliseconds,
            # and no task is left to bolt: every turn is owned here and cancelled at shutdown.
            process_before_response=True,
        )
        self.app.middleware(self._claim)
        self.app.event("app_mention")(self._on_turn)
        self.app.event("message")(self._on_turn)
        self.app.event("assistant_thread_started")(self._on_thread_started)
        self.app.event("assistant_thread_context_changed")(self._ignore)
        self.app.command("/nerve")(self._on_command)
        self.app.action(ACTION_PATTERN)(self._on_approval_click)
        self.app.action(FEEDBACK_ACTION)(self._on_feedback_click)
        self.app.action(INPUT_ACTIONS)(self._on_input_click)
        self.app.view_submission(INPUT_FORM)(self._on_input_submit)
        self.app.view_closed(INPUT_FORM)(self._on_input_closed)
        self.app.action(CONNECT_ACTIONS)(self._on_link_click)
        self.app.action(DISCONNECT_ACTION)(self._on_disconnect_click)

    # --- lifecycle ---------------------------------------------------------------------------

    async def identity(self) -> Identity:
        """Who the bot is (auth.test, asked once).

        Raises ConfigError naming the token if Slack refuses it, StartupError if Slack cannot be reached.
        """
        if self._me is None:
            async with _reaching_slack(self.settings, "SLACK_BOT_TOKEN"):
                auth = await self.client.auth_test()
            self._me = Identity(
                user_id=str(auth["user_id"]), bot_id=auth.get("bot_id"), name=str(auth.get("user") or "")
            )
        return self._me

    async def recover(self) -> int:
        """Answer the events claimed before a restart but never finished; returns how many.

        With jobs, only the events that have no job waiting or running are queued: another process
        may be answering the rest right now."""
        count = await self._recorded.recover(lambda _event_id, turn: self._start_turn(turn))
        return count + await self._desk.recover()

    async def answer_event(self, event_id: str) -> None:
        """The job of one recorded event (any process may run it): answer it unless it was answered."""
        turn = await self._recorded.take(event_id)
        if turn is not None:
            self._follow(turn)
            await self._turns.run(turn)

    def job_handlers(self) -> dict[str, JobHandler]:
        """What this bot's worker runs: Slack's jobs, by name."""
        return job_handlers(self.answer_event, self._desk.go_on_here, self._turns.answer_deferred)

    async def _left_over(self, event_id: str, payload: str) -> Turn | None:
        """The turn of a recorded event, answered outside its delivery (a restart, a job). It waits
        for a turn slot however many there are: its person was never answered. An entry that is no
        turn (stored by an older version) is dropped with a log line."""
        me = await self.identity()
        try:
            body = json.loads(payload)
            turn = classify(body, me, allow_bots=True, follow_threads=True, followed=lambda _key: True)
        except (ValueError, TypeError, AttributeError):
            turn = None
        if turn is None:
            logger.warning("Slack event %s cannot be answered; dropping it", event_id)
            await self.agent.inbox.finish_event(PLATFORM, event_id)
            return None
        return replace(turn, incoming=replace(turn.incoming, replayed=True))

    def spawn(self, work: Coroutine[Any, Any, None], name: str | None = None) -> None:
        self._owned.spawn(work, name)

    async def idle(self) -> None:
        """Wait until every background task has finished (tests, graceful shutdown)."""
        await self._owned.idle()

    def start_sweeper(self, interval: float = SWEEP_SECONDS) -> None:
        """Look for expired approval requests every `interval` seconds until `aclose`."""
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(sweep_forever(self.sweep, interval))

    async def sweep(self) -> list[str]:
        """Expire the requests whose time ran out; their turns go on in the background. With jobs,
        also queue the events a process recorded but died before queueing."""
        return await sweep(self._recorded, self._desk)

    async def _stop_sweeper(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None

    async def drain(self, grace: float) -> None:
        """SIGTERM: start no new turn (a delivery is kept in the inbox for the next start) and give
        the running ones up to `grace` seconds to finish."""
        self._stopping = True
        await self._stop_sweeper()
        if not self._tasks:
            return
        logger.warning("nerve: waiting up to %g s for %d running turn(s)", grace, len(self._tasks))
        await self._owned.drain(grace, "turn(s)")

    async def aclose(self) -> None:
        """Cut off unfinished turns: their events stay unfinished and are answered after a restart.

        No post starts any more; an answer already going out finishes the call on its way (within
        DELIVERY_ALLOWANCE), so the next start knows whether it landed and never posts it twice."""
        self._stopping = True
        await self._stop_sweeper()
        self._poster.stop_posting()
        tasks = list(self._tasks)
        delivering = self._turns.delivering
        for task in tasks:
            if task not in delivering:
                task.cancel()
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=DELIVERY_ALLOWANCE)
            for task in late:
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- events ------------------------------------------------------------------------------

    def _follow(self, turn: Turn) -> None:
        if turn.key.thread == DM_THREAD:
            return
        self._followed[turn.key] = None
        self._followed.move_to_end(turn.key)
        while len(self._followed) > _FOLLOWED_MAX:
            self._followed.popitem(last=False)

    async def _claim(
        self, body: dict[str, Any], context: AsyncBoltContext, next: Callable[[], Awaitable[None]]
    ) -> BoltResponse | None:
        """Decide whether a delivery is a turn, and claim it in the inbox before it is acked."""
        if body.get("type") == "event_callback" and context.bot_user_id:
            me = Identity(user_id=context.bot_user_id, bot_id=context.bot_id)
            turn = classify(
                body,
                me,
                allow_bots=self.settings.nerve_slack_allow_bots,
                follow_threads=self.settings.nerve_slack_follow_threads,
                followed=self._followed.__contains__,
            )
            if turn is not None:
                # On PostgreSQL (jobs): recorded within Slack's 3 s, or refused with a 503 so Slack
                # retries (`.intake`); a claim that landed after the refusal is queued by the retry
                # (`_left_behind`). The embedded SQLite store is never unreachable, and a turn it
                # claimed late would have no such second chance in this process: no bound there.
                deadline = (
                    asyncio.get_running_loop().time() + INTAKE_WAIT_SECONDS
                    if self._launch.jobs is not None
                    else None
                )
                try:
                    async with asyncio.timeout_at(deadline):
                        answered = await self._record(turn, body)
                except (StoreError, TimeoutError) as exc:
                    return unrecorded(turn.event_id, exc)
                if answered is not None:
                    return answered
                context["nerve_turn"] = turn
                context["nerve_deadline"] = deadline
        await next()
        return None

    async def _record(self, turn: Turn, body: dict[str, Any]) -> BoltResponse | None:
        """Claim a turn's delivery in the inbox; the answer to a re-delivery, None for a new one."""
        if not await self.agent.inbox.claim_event(PLATFORM, turn.event_id, inbox_payload(body)):
            if self._launch.jobs is not None and await self._left_behind(turn):
                logger.warning(
                    "Slack re-delivered event %s, recorded but never queued: queued now", turn.event_id
                )
                return BoltResponse(status=200, body="")
            logger.info("Slack re-delivered event %s; already handled", turn.event_id)
            return BoltResponse(status=200, body="")
        if self._stopping:
            logger.info("kept Slack event %s for the next start (shutting down)", turn.event_id)
            return BoltResponse(status=200, body="")
        return None

    async def _left_behind(self, turn: Turn) -> bool:
        """A re-delivered event that a process recorded but died before queueing: queue it now, so
        the thread's next message (which Slack sends only after this one is acked) stays behind it."""
        if await self.agent.inbox.unfinished_payload(PLATFORM, turn.event_id) is None:
            return False
        self._follow(turn)
        return await self._launch.requeue(turn.event_id, turn.key)

    async def _on_turn(self, context: AsyncBoltContext) -> None:
        turn = context.get("nerve_turn")
        if not isinstance(turn, Turn):
            return
        if self._launch.jobs is None:
            self._start_turn(turn)
            return
        # Queued before the ack: Slack sends a thread's next message only after this one is queued,
        # so the thread's jobs (one at a time, in queue order) answer in the order people wrote.
        self._follow(turn)
        deadline = context.get("nerve_deadline")
        try:
            async with asyncio.timeout_at(deadline if isinstance(deadline, float) else None):
                await self._launch.event(turn.event_id, turn.key, lambda: self._turns.run(turn))
        except TimeoutError:
            left_to_sweep(turn.event_id)  # recorded: acked, and queued by a later sweep

    def _start_turn(self, turn: Turn) -> None:
        self._follow(turn)
        if self._launch.jobs is None:
            self.spawn(self._turns.run(turn))
        else:
            self.spawn(self._launch.event(turn.event_id, turn.key, lambda: self._turns.run(turn)))

    async def _ignore(self) -> None:
        return None

    async def _on_approval_click(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        # Acked before any work: Slack shows an error to the clicker after 3 s without an ack.
        await ack()
        self.spawn(on_click(self._desk, self._poster, body))

    async def _on_feedback_click(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        if self._feedback is not None:
            self.spawn(record_click(self._feedback, body))

    async def _on_input_click(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        # Acked at once; "Fill in" opens its modal from the background task right away (the click's
        # trigger_id is good for 3 s).
        await ack()
        self.spawn(self._inputs.on_click(body))

    async def _on_input_submit(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        # The answer is checked before the ack: what is wrong goes back in the ack, into the open form.
        # What follows a good answer (its message, a parked turn going on) runs after the ack.
        response = await self._inputs.on_submit(body)
        if response is None:
            await ack()
        else:
            await ack(response_action=response["response_action"], errors=response["errors"])

    async def _on_input_closed(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        self.spawn(self._inputs.on_close(body))

    async def _on_link_click(self, ack: AsyncAck) -> None:
        # The Connect button opens its link in the browser; Slack tells us of the click too.
        await ack()

    async def _on_disconnect_click(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        self.spawn(self._sign_ins.on_disconnect_click(body))

    def resume_signed_in(self, signed: SignedIn) -> None:
        """A person finished signing in (the callback): the turns that waited for it go on now."""
        for request_id in signed.request_ids:
            self.spawn(self._desk.go_on(request_id))  # a job of its thread when jobs are shared

    async def _on_thread_started(self, event: dict[str, Any]) -> None:
        thread = event.get("assistant_thread") or {}
        channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
        if channel and thread_ts:
            self.spawn(self._suggest_prompts(str(channel), str(thread_ts)))

    async def _suggest_prompts(self, channel: str, thread_ts: str) -> None:
        try:
            await self.client.assistant_threads_setSuggestedPrompts(
                channel_id=channel, thread_ts=thread_ts, prompts=list(SUGGESTED_PROMPTS)
            )
        except SlackApiError as exc:
            logger.warning("could not set suggested prompts: %s", exc.response.get("error"))

    # --- /nerve --------------------------------------------------------------------------------

    async def _on_command(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        words = str(command.get("text") or "").split()
        found = command_on(SLACK, words[0].lower() if words else "help")
        if found is None:
            await ack(text=unknown_command_text(words[0]), response_type="ephemeral")
        else:
            await self.command_handlers()[found.name](ack, command, words)

    def command_handlers(self) -> dict[str, SubCommand]:
        """What each `/nerve` sub-command of the command table runs (a test holds the two together)."""
        prompts, connections = self._prompts.on_command, self._sign_ins.on_command
        return {
            "tools": self._tools_command,
            "prompts": prompts,
            "prompt": prompts,
            "approvals": self._approvals_command,
            "connections": connections,
            "connect": connections,
            "disconnect": connections,
            "reset": self._reset_command,
            "help": lambda ack, command, words: ack(text=HELP, response_type="ephemeral"),
        }

    async def _tools_command(self, ack: AsyncAck, command: dict[str, Any], words: list[str]) -> None:
        user = str(command.get("user_id") or "")
        place = place_of_command(str(command.get("channel_id") or ""), command.get("channel_name"), user)
        await ack(text=tools_text(self.agent, place), response_type="ephemeral")

    async def _approvals_command(self, ack: AsyncAck, command: dict[str, Any], words: list[str]) -> None:
        user = str(command.get("user_id") or "")
        text = await approvals_text(self.agent, self.settings.admins, user, words[1:])
        await ack(text=text, response_type="ephemeral")

    async def _reset_command(self, ack: AsyncAck, command: dict[str, Any], words: list[str]) -> None:
        channel = str(command.get("channel_id") or "")
        if not is_dm_channel(channel, command.get("channel_name")):
            await ack(text=RESET_IN_CHANNEL, response_type="ephemeral")
            return
        await ack()
        key = ConversationKey(
            platform=PLATFORM, workspace=str(command.get("team_id") or ""), channel=channel, thread=DM_THREAD
        )
        self.spawn(self._reset_dm(key, str(command.get("user_id") or "")))

    async def _reset_dm(self, key: ConversationKey, user: str) -> None:
        try:
            await self.agent.reset(key)
            text = "Started a new conversation: I have forgotten what we said before in this DM."
        except Exception:
            logger.exception("reset of %s failed", key)
            text = "Sorry — I could not reset our conversation; please try again."
        try:
            await self.client.chat_postEphemeral(channel=key.channel, user=user, text=text)
        except SlackApiError as exc:
            logger.warning("could not confirm the reset: %s", exc.response.get("error"))


def build_bot(
    agent: Agent,
    settings: SlackSettings,
    *,
    client: AsyncWebClient | None = None,
    pace: float = 1.0,
    status_interval: float = 1.0,
    stream_interval: float = 0.4,
    feedback: FeedbackStore | None = None,
    jobs: TurnJobs | None = None,
) -> SlackBot:
    """The bot with its AsyncApp; `pace`, `status_interval` (edits) and `stream_interval` (appends to a
    streaming message) are seconds, within Slack's limits by default. With `jobs`, turns are queued
    for whichever process's worker is free (`adapters.slack.jobs`)."""
    return SlackBot(
        agent,
        settings,
        client or make_client(settings),
        pace=pace,
        status_interval=status_interval,
        stream_interval=stream_interval,
        feedback=feedback,
        jobs=jobs,
    )


def build_app(agent: Agent, settings: SlackSettings, *, client: AsyncWebClient | None = None) -> AsyncApp:
    """The AsyncApp answering Slack events with `agent` (its Web API client may be given, e.g. a mock).

    It does not check request signatures itself: serve it with `serve_http` (or Socket Mode), which does.
    """
    return build_bot(agent, settings, client=client).app


# --- the runner ------------------------------------------------------------------------------------

EVENTS_PATH = "/slack/events"


def check_settings(settings: SlackSettings) -> None:
    """Fail before anything starts when a required Slack setting is missing."""
    require_bot_token(settings)
    if settings.slack_app_token is None and settings.slack_signing_secret is None:
        raise ConfigError(
            "set SLACK_APP_TOKEN (xapp-…, for Socket Mode) or SLACK_SIGNING_SECRET (for Events API over HTTP)"
        )


async def serve_http(
    bot: SlackBot, host: str, port: int, ops: OpsEndpoints | None = None
) -> tuple[web.AppRunner, str]:
    """Serve the Events API (and `ops`, if given) at `host:port`; returns the runner and the events
    URL actually bound."""
    secret = bot.signing_secret
    if secret is None:
        raise ConfigError("SLACK_SIGNING_SECRET is not set: it is needed to receive events over HTTP")

    async def events(request: web.Request) -> web.Response:
        raw = await request.read()
        problem = signature_problem(
            secret,
            raw,
            request.headers.get("X-Slack-Request-Timestamp"),
            request.headers.get("X-Slack-Signature"),
            now=time.time(),
        )
        if problem is not None:
            logger.warning("refused a delivery from %s, bad Slack signature: %s", request.remote, problem)
            return web.json_response({"error": "invalid request"}, status=401)
        # Slack sends UTF-8; anything else is decoded with replacement rather than dropped with a 500.
        text = scrub_bytes(raw)
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
    if ops is not None:
        ops.install(web_app)
    runner = quiet_runner(web_app)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
    except OSError as exc:
        await runner.cleanup()
        raise ConfigError(
            f"cannot listen on {host}:{port} (NERVE_HTTP_HOST, NERVE_HTTP_PORT): {exc.strerror}"
        ) from None
    bound = runner.addresses[0]
    return runner, f"http://{bound[0]}:{bound[1]}{EVENTS_PATH}"


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
    """Run until cancelled, or until `stop` is set and the running turns had their grace (above):
    Socket Mode when SLACK_APP_TOKEN is set, else HTTP at /slack/events.

    `host` defaults to NERVE_HTTP_HOST. `ready` (if given) receives "socket-mode" or the events URL
    once deliveries can arrive. A Slack that refuses the tokens or cannot be reached raises
    ConfigError or StartupError before any event is served. /healthz, /readyz and /metrics answer
    at the same host and port (`adapters.ops_http`; `ops_ready` receives their base URL).
    """
    check_settings(settings)
    bind = host or settings.nerve_http_host
    stop = stop or asyncio.Event()
    ops = OpsEndpoints(agent, PlatformLink("Slack"), ready=ops_ready, stopping=stop)
    # The browser's way back after signing in, on the same port in every mode.
    sign_ins = sign_in_endpoints(agent.connections, settings.nerve_public_url, "Slack")
    if sign_ins is not None:
        ops.routes.append(sign_ins.install)
    socket_mode = settings.slack_app_token is not None
    async with (
        aiohttp.ClientSession() as session,
        ops.serving(bind, settings.nerve_http_port, alone=socket_mode),
        shared_jobs(settings) as jobs,
    ):
        bot = build_bot(agent, settings, client=make_client(settings, session=session), jobs=jobs)
        if sign_ins is not None:
            sign_ins.resume = bot.resume_signed_in
        try:
            await bot.identity()
            if jobs is not None:
                work(jobs, bot, settings)
                ops.worker = jobs.worker_alive
            recovered = await bot.recover()
            if recovered:
                logger.warning(
                    "answering %d Slack event(s) or approval(s) left unfinished before the restart", recovered
                )
            bot.start_sweeper(sweep_interval)
            if settings.slack_app_token is not None:
                app_token = settings.slack_app_token.get_secret_value()
                # Asked here so a refused app token stops the start; the SDK would retry it forever.
                async with _reaching_slack(settings, "SLACK_APP_TOKEN"):
                    opened = await bot.client.apps_connections_open(app_token=app_token)
                handler = socket_mode_handler(bot.app, app_token, bot.client)
                handler.client.wss_uri = str(opened["url"])
                await handler.connect_async()  # type: ignore[no-untyped-call]
                ops.platform.connected(handler.client.is_connected)
                me = await bot.identity()
                log_up("Slack: Socket Mode connected as @%s (%s)", me.name, me.user_id)
                try:
                    if ready is not None and not ready.done():
                        ready.set_result("socket-mode")
                    await stop.wait()
                    await drained(bot, jobs, settings.nerve_shutdown_grace)
                finally:
                    await handler.close_async()  # type: ignore[no-untyped-call]
            else:
                ops.platform.connected(always)
                runner, url = await serve_http(bot, bind, settings.nerve_http_port, ops)
                ops.announce(url.removesuffix(EVENTS_PATH))
                log_up("serving Slack events and interactions at %s", url)
                try:
                    if ready is not None and not ready.done():
                        ready.set_result(url)
                    await stop.wait()
                    await drained(bot, jobs, settings.nerve_shutdown_grace)
                finally:
                    await runner.cleanup()
        finally:
            await bot.aclose()
