"""The bot on Slack: slack-bolt's AsyncApp with its listeners, and what they share.

Every delivery is claimed in the inbox before the ack (`adapters.slack.intake`) and answered in the
background, exactly once. On SIGTERM intake stops and running turns get NERVE_SHUTDOWN_GRACE seconds;
the rest are cut off and answered at the next start (`adapters.slack.turns`).

What each listener does lives with its job; the listeners that concern no turn are apart too: the
workspaces the app joins and leaves (`adapters.slack.workspaces`), and a DM's suggested prompts and
stop button (`adapters.slack.assistant`). Here they are assembled, started and stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from adapters import jobs_runtime
from adapters.common.desk import AskDesk
from adapters.common.intake import Recorded, sweep, sweep_forever
from adapters.common.tasks import Owned
from adapters.oauth_http import SignInEndpoints
from adapters.ops_http import OpsEndpoints
from adapters.slack.approval_view import ACTION_PATTERN
from adapters.slack.assistant import AssistantEvents
from adapters.slack.clicks import FeedbackStore, SlackApprovals, on_click, record_click
from adapters.slack.client import make_client, no_team, quiet_bolt_token_notice, reaching_slack
from adapters.slack.commands import NerveCommands
from adapters.slack.events import PLATFORM, Identity, Turn, classify
from adapters.slack.files import SlackFiles
from adapters.slack.input_view import ACTION_PATTERN as INPUT_ACTIONS
from adapters.slack.input_view import CALLBACK_ID as INPUT_FORM
from adapters.slack.inputs import InputClicks
from adapters.slack.installs import InstallationStore, oauth_on, oauth_settings, team_entry
from adapters.slack.intake import Intake
from adapters.slack.memory import MEMORY_ACTIONS, SlackMemory
from adapters.slack.post import Poster
from adapters.slack.render import FEEDBACK_ACTION
from adapters.slack.rights import RIGHTS_ACTIONS, SlackRights
from adapters.slack.schedules import SCHEDULE_ACTIONS, SlackSchedules
from adapters.slack.sessions import AgentSessions
from adapters.slack.settings import SlackSettings
from adapters.slack.sign_in import CONNECT_ACTIONS, DISCONNECT_ACTION, SlackSignIns
from adapters.slack.turns import TurnRunner
from adapters.slack.workspaces import WorkspaceEvents
from adapters.slack.zones import UserZones
from bot.agent import Agent
from bot.jobs import JobHandler
from bot.types import SignedIn

if TYPE_CHECKING:
    from bot.jobs import TurnJobs

logger = logging.getLogger(__name__)
Listener = Callable[[AsyncAck, dict[str, Any]], Awaitable[None]]

# Seconds a shutdown waits, after the grace, for answers that were already going out.
DELIVERY_ALLOWANCE = 5.0
# How often requests past their expiry are looked for; a request expires at most this late.
SWEEP_SECONDS = 15.0


class SlackBot:
    """The AsyncApp and what its listeners share; with `jobs`, turns queue for any process's free worker."""

    def __init__(
        self,
        agent: Agent,
        settings: SlackSettings,
        client: AsyncWebClient | None = None,
        *,
        pace: float = 1.0,
        status_interval: float = 1.0,
        stream_interval: float = 0.4,
        feedback: FeedbackStore | None = None,
        jobs: TurnJobs | None = None,
    ) -> None:
        self.agent = agent
        self.settings = settings
        self.client = client = client or make_client(settings)
        # "Add to Slack" (SLACK_CLIENT_ID): Bolt's install pages, and each event answered with its own
        # workspace's token, found in the installation store; else the one SLACK_BOT_TOKEN.
        self.oauth = oauth_settings(settings, agent.installs) if oauth_on(settings) else None
        installs = self.oauth.installation_store if self.oauth is not None else None
        self.installs = installs if isinstance(installs, InstallationStore) else None
        self._enter = enter = team_entry(self.installs) if self.installs is not None else no_team
        self._poster = Poster(client, pace=pace)
        self._owned = Owned()
        # Feedback buttons only where clicks can be kept: the store, when it keeps feedback.
        self._feedback = feedback or (agent.inbox if isinstance(agent.inbox, FeedbackStore) else None)
        self._sign_ins = SlackSignIns(
            agent.connections, self._poster, self._owned.spawn, expires_in=settings.nerve_sign_in_timeout
        )
        zones = UserZones(client)
        # Shared files' bytes come through the client's session (`running` gives it one).
        self._files = SlackFiles(client, settings.slack_api_base_url)
        self._turns = TurnRunner(
            agent,
            self._poster,
            status_interval=status_interval,
            stream_interval=stream_interval,
            feedback=self._feedback is not None,
            watch=self._sign_ins.watch,
            zones=zones,
            files=self._files,
            sessions=AgentSessions(client, enabled=settings.slack_experience == "agent"),
            enter=enter,
            admins=settings.admins,
        )
        # Where turns run: jobs any process takes (PostgreSQL, `adapters.jobs_runtime`), else tasks here.
        self._launch = jobs_runtime.Launcher(jobs, self._owned.spawn, PLATFORM)
        # People's schedules: run from `start_schedules` until the bot stops (their slots as jobs
        # with PostgreSQL), and their commands.
        self.schedules = SlackSchedules(
            agent,
            self._poster,
            self._turns,
            zones,
            grace=settings.nerve_schedule_grace,
            jobs=self._launch.slots,
        )
        self._intake = Intake(agent, settings, self._launch, self._turns.run, self._owned.spawn)
        self._desk = AskDesk(
            agent, PLATFORM, SlackApprovals(self._poster, enter), self._turns, self._launch, self._owned.spawn
        )
        self._inputs = InputClicks(agent, self._poster, self._desk.go_on, self._owned.spawn)
        self._recorded = Recorded(agent, PLATFORM, self._launch, self._left_over, noun="Slack event")
        self._sweeper: asyncio.Task[None] | None = None
        # Who the bot is in each workspace (auth.test with its token), asked once per token.
        self._me: dict[str | None, Identity] = {}
        self._memory = SlackMemory(agent, self._poster)
        self._rights = SlackRights(agent, self._poster, self._owned.spawn)
        secret = settings.slack_signing_secret.get_secret_value() if settings.slack_signing_secret else None
        self.signing_secret = secret
        self.commands = NerveCommands(
            agent,
            self._poster,
            settings,
            self._owned.spawn,
            identity=self.identity,
            start=self._intake.start,
            connections=self._sign_ins.on_command,
            memory=self._memory.on_command,
            rights=self._rights.on_command,
            schedules=self.schedules.on_command,
            timezone=self.schedules.on_timezone,
        )
        quiet_bolt_token_notice()
        self.app = AsyncApp(
            client=client,
            signing_secret=secret or "",
            # Socket Mode deliveries carry no signature; over HTTP, `serve_http` checks it on the raw
            # bytes before bolt sees the body (bolt's own check turns a malformed header into a 500).
            request_verification_enabled=False,
            # The listeners below only schedule work, so the ack still leaves within milliseconds,
            # and no task is left to bolt: every turn is owned here and cancelled at shutdown.
            process_before_response=True,
            oauth_settings=self.oauth,
            installation_store=self.installs,
            installation_store_bot_only=self.installs is not None,
        )
        # The manifests subscribe to both: an install is deleted, or the one bot token is said dead.
        workspaces = WorkspaceEvents(self.installs)
        self.app.event("app_uninstalled")(workspaces.on_uninstalled)
        self.app.event("tokens_revoked")(workspaces.on_uninstalled)
        if self.installs is not None:
            self.app.middleware(workspaces.use_workspace)
            # Enterprise Grid: the app removed from one workspace of an organization.
            self.app.event("app_uninstalled_team")(workspaces.on_left_teams)
            self.app.event("team_access_revoked")(workspaces.on_left_teams)
        self.app.middleware(self._intake.claim)
        self.app.event("app_mention")(self._intake.on_turn)
        self.app.event("message")(self._intake.on_turn)
        assistant = AssistantEvents(
            client, self._turns, self._owned.spawn, agent_experience=settings.slack_experience == "agent"
        )
        self.app.event("assistant_thread_started")(assistant.on_thread_started)
        self.app.event("assistant_thread_context_changed")(self._ack_only)
        # The Agent messaging experience: the DM's Messages tab opened, and the stop button pressed.
        self.app.event("app_home_opened")(assistant.on_home_opened)
        self.app.event("agent_session_stopped")(assistant.on_session_stopped)
        self.app.command("/nerve")(self.commands.on_command)
        self.app.action(ACTION_PATTERN)(self._acked(partial(on_click, self._desk, self._poster)))
        self.app.action(FEEDBACK_ACTION)(self._acked(self._on_feedback_click))
        self.app.action(INPUT_ACTIONS)(self._acked(self._inputs.on_click))
        self.app.view_submission(INPUT_FORM)(self._on_input_submit)
        self.app.view_closed(INPUT_FORM)(self._acked(self._inputs.on_close))
        self.app.action(CONNECT_ACTIONS)(self._ack_only)
        self.app.action(DISCONNECT_ACTION)(self._acked(self._sign_ins.on_disconnect_click))
        self.app.action(MEMORY_ACTIONS)(self._acked(self._memory.on_click))
        self.app.action(RIGHTS_ACTIONS)(self._acked(self._rights.on_click))
        self.app.action(SCHEDULE_ACTIONS)(self._acked(self.schedules.on_click))

    # --- lifecycle ---------------------------------------------------------------------------

    async def identity(self) -> Identity:
        """Who the bot is (auth.test, asked once); ConfigError or StartupError when Slack refuses it."""
        token = self.client.token
        if token not in self._me:
            async with reaching_slack(self.settings, "SLACK_BOT_TOKEN"):
                auth = await self.client.auth_test()
            self._me[token] = Identity(
                user_id=str(auth["user_id"]), bot_id=auth.get("bot_id"), name=str(auth.get("user") or "")
            )
        return self._me[token]

    async def recover(self) -> int:
        """Answer the events claimed before a restart but never finished (with jobs, those with no job)."""
        count = await self._recorded.recover(lambda _event_id, turn: self._intake.start(turn))
        return count + await self._desk.recover()

    async def answer_event(self, event_id: str) -> None:
        """The job of one recorded event (any process may run it): answer it unless it was answered."""
        turn = await self._recorded.take(event_id)
        if turn is not None:
            self._intake.follow(turn)
            await self._turns.run(turn)

    def job_handlers(self) -> dict[str, JobHandler]:
        return jobs_runtime.job_handlers(
            PLATFORM,
            self.answer_event,
            self._desk.go_on_here,
            self._turns.answer_deferred,
            run_slot=self.schedules.run_slot,
        )

    async def _left_over(self, event_id: str, payload: str) -> Turn | None:
        """The turn of a recorded event; an entry that is no turn (stored by an older version) is dropped."""
        try:
            body = json.loads(payload)
            async with self._enter(str(body.get("team_id") or "")):
                me = await self.identity()
            dm_threads = self.settings.slack_experience == "agent"
            turn = classify(
                body,
                me,
                allow_bots=True,
                follow_threads=True,
                followed=lambda _key: True,
                dm_threads=dm_threads,
            )
        except (ValueError, TypeError, AttributeError):
            turn = None
        if turn is None:
            logger.warning("Slack event %s cannot be answered; dropping it", event_id)
            await self.agent.inbox.finish_event(PLATFORM, event_id)
            return None
        return replace(turn, incoming=replace(turn.incoming, replayed=True))

    async def idle(self) -> None:
        """Wait until every background task has finished (tests, graceful shutdown)."""
        await self._owned.idle()

    def start_schedules(self) -> None:
        """Run Slack's due schedule slots (each once, whichever process claims it) until the bot stops."""
        if self.agent.schedules_on:
            self.schedules.start()

    def start_sweeper(self, interval: float = SWEEP_SECONDS) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(sweep_forever(self.sweep, interval))

    async def sweep(self) -> list[str]:
        """Expire the requests whose time ran out, and queue events recorded but never queued."""
        return await sweep(self._recorded, self._desk)

    async def _stop_intake(self) -> None:
        self._intake.stopping = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)
            self._sweeper = None

    async def drain(self, grace: float) -> None:
        """SIGTERM: start no new turn and give the running ones up to `grace` seconds to finish."""
        await self._stop_intake()
        if not self._owned.tasks:
            await self.schedules.settle(grace)
            return
        logger.warning("nerve: waiting up to %g s for %d running turn(s)", grace, len(self._owned.tasks))
        await asyncio.gather(self._owned.drain(grace, "turn(s)"), self.schedules.settle(grace))

    async def aclose(self) -> None:
        """Cut off unfinished turns; an answer going out finishes the call on its way (within
        DELIVERY_ALLOWANCE), so the next start knows whether it landed and never posts it twice."""
        await self._stop_intake()
        # Scheduled runs still under way stop first (they are handed on at the next start), while
        # their notes can still be posted.
        await self.schedules.stop()
        self._poster.stop_posting()
        tasks = list(self._owned.tasks)
        for task in tasks:
            if task not in self._turns.delivering:
                task.cancel()
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=DELIVERY_ALLOWANCE)
            for task in late:
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._files.aclose()

    def _acked(self, work: Callable[[dict[str, Any]], Coroutine[Any, Any, None]]) -> Listener:
        """A listener that acks at once (Slack shows an error after 3 s) and works in the background."""

        async def listener(ack: AsyncAck, body: dict[str, Any]) -> None:
            await ack()
            self._owned.spawn(work(body))

        return listener

    async def _on_feedback_click(self, body: dict[str, Any]) -> None:
        if self._feedback is not None:
            await record_click(self._feedback, body)

    async def _on_input_submit(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        # The answer is checked before the ack: what is wrong goes back in the ack, into the open form.
        # What follows a good answer (its message, a parked turn going on) runs after the ack.
        await ack(**(await self._inputs.on_submit(body) or {}))

    async def _ack_only(self, ack: AsyncAck) -> None:
        # Nothing to do: the Connect button opens its link in the browser (Slack tells us of the click
        # too), and an assistant thread's context change needs no answer.
        await ack()

    def resume_signed_in(self, signed: SignedIn) -> None:
        """A person finished signing in (the callback): the turns that waited for it go on now."""
        for request_id in signed.request_ids:
            self._owned.spawn(self._desk.go_on(request_id))  # a job of its thread when jobs are shared


build_bot = SlackBot  # the name the runners and tests build a bot by


@asynccontextmanager
async def running(
    agent: Agent,
    settings: SlackSettings,
    ops: OpsEndpoints,
    bind: str,
    *,
    alone: bool = True,
    sign_ins: SignInEndpoints | None = None,
) -> AsyncIterator[tuple[SlackBot, TurnJobs | None]]:
    """The bot of `nerve slack` and `nerve worker`: `ops` served at `bind` (by the events' app when
    not `alone`), the bot known to Slack and working on the shared jobs if there are any."""
    async with (
        aiohttp.ClientSession() as session,
        ops.serving(bind, settings.nerve_http_port, alone=alone),
        jobs_runtime.shared_jobs(settings) as jobs,
    ):
        bot = build_bot(agent, settings, client=make_client(settings, session=session), jobs=jobs)
        if sign_ins is not None:
            sign_ins.resume = bot.resume_signed_in
        try:
            if bot.oauth is None:  # with installs in many workspaces, each has its own identity
                await bot.identity()
            if jobs is not None:
                jobs_runtime.work(jobs, bot, settings)
                ops.worker = jobs.worker_alive
            yield bot, jobs
        finally:
            await bot.aclose()
