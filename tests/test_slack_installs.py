"""Installs in many workspaces: "Add to Slack" through Bolt's OAuth flow against the fake Slack,
installs sealed in the store, each workspace answered with its own token, uninstalls."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.slack.app import build_bot
from adapters.slack.client import make_client
from adapters.slack.installs import DEFAULT_SCOPES, REDIRECT_PATH, InstallationStore
from adapters.slack.serve import EVENTS_PATH, serve_http
from bot.agent import AgentConfig
from bot.installs import workspace_installs
from bot.mcp.host import MCPHost
from bot.policy.scopes import Rule, Scopes
from bot.seams import ToolHost
from bot.types import ToolResult
from tests.fakes.clock import Clock
from tests.fakes.llm_server import Reply, Responder, Step, reply
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_installs import FakeWorkspace
from tests.test_slack_approvals import (
    approval_messages,
    host,  # noqa: F401  (fixture)
    notes,  # noqa: F401  (fixture)
    ran,
    read_and_add,
)
from tests.test_slack_harness import Rig, ToolFn, core, event_body, next_ts, settings_for

SECRET_KEY = "installs-test-secret-key-0123456789"


@contextlib.asynccontextmanager
async def installs_rig(
    tmp_path: Path,
    script: Sequence[Step] | Responder,
    *,
    tools: dict[str, ToolFn] | None = None,
    config: AgentConfig | None = None,
    memories: bool = False,
    tool_host: ToolHost | None = None,
    approvals: bool = False,
    clock: Callable[[], float] = time.time,
    **settings: Any,
) -> AsyncIterator[Rig]:
    """The real bot over HTTP with "Add to Slack" on: no SLACK_BOT_TOKEN, the fake's OAuth app."""
    options: dict[str, Any] = {"memories": memories, "approvals": approvals, "clock": clock}
    async with core(tmp_path, script, tools=tools, config=config, host=tool_host, **options) as c:
        c.agent.installs = workspace_installs(c.store, SECRET_KEY)
        values: dict[str, Any] = {
            "slack_bot_token": None,
            "slack_client_id": c.slack.installs.client_id,
            "slack_client_secret": c.slack.installs.client_secret,
            "slack_authorize_url": c.slack.installs.url(c.slack.base),
            "nerve_secret_key": SECRET_KEY,
        }
        values.update(settings)
        cfg = settings_for(c.slack, **values)
        bot = build_bot(c.agent, cfg, client=make_client(cfg), pace=0, status_interval=0, stream_interval=0)
        runner, url = await serve_http(bot, "127.0.0.1", 0)
        c.slack.installs.redirect_uri = url.removesuffix(EVENTS_PATH) + REDIRECT_PATH
        try:
            async with aiohttp.ClientSession() as http:
                yield Rig(
                    slack=c.slack,
                    llm=c.llm,
                    backend=c.backend,
                    store=c.store,
                    agent=c.agent,
                    bot=bot,
                    host=c.host,
                    url=url,
                    http=http,
                )
        finally:
            await bot.aclose()
            await runner.cleanup()


def base_of(r: Rig) -> str:
    return r.url.removesuffix(EVENTS_PATH)


class Browser:
    """A person's browser. Bolt's state cookie is `Secure` (nerve is served over HTTPS), which
    aiohttp keeps off plain HTTP: this browser carries it back to nerve as one on HTTPS would."""

    def __init__(self, base: str) -> None:
        self.base = base  # where nerve serves its install pages
        self.cookie: str | None = None

    async def get(self, url: str) -> tuple[int, str, str | None]:
        """One page: its status, text and where it redirects."""
        headers = {"Cookie": self.cookie} if self.cookie and url.startswith(self.base) else {}
        async with (
            aiohttp.ClientSession() as http,
            http.get(url, headers=headers, allow_redirects=False) as page,
        ):
            for morsel in page.cookies.values():
                if morsel.value and morsel.value != "deleted":
                    self.cookie = f"{morsel.key}={morsel.value}"
            return page.status, await page.text(), page.headers.get("Location")

    async def add_to_slack(self) -> tuple[int, str]:
        """ "Add to Slack", Allow on Slack's page, back to nerve: the last page's status and text."""
        url: str | None = f"{self.base}/slack/install"
        status, text = 0, ""
        while url is not None:
            status, text, url = await self.get(url)
        return status, text


async def add_to_slack(r: Rig, workspace: FakeWorkspace) -> tuple[int, str]:
    r.slack.installs.installing = workspace
    return await Browser(base_of(r)).add_to_slack()


def database_files(folder: Path) -> list[bytes]:
    """The SQLite database's files (with its write-ahead log), as bytes."""
    return [path.read_bytes() for path in folder.glob("nerve.db*")]


def mention_in(
    workspace: FakeWorkspace, text: str, *, channel: str, user: str | None = None
) -> dict[str, Any]:
    event = {
        "type": "app_mention",
        "user": user or f"U{workspace.team_id[-4:]}USER",
        "text": f"<@{workspace.bot_user_id}> {text}",
        "ts": next_ts(),
        "channel": channel,
        "team": workspace.team_id,
    }
    body = event_body(event, team=workspace.team_id)
    body["authorizations"] = [
        {
            "team_id": workspace.team_id,
            "user_id": workspace.bot_user_id,
            "is_bot": True,
            "enterprise_id": None,
        }
    ]
    return body


async def test_add_to_slack_installs_the_workspace_with_its_token_sealed(tmp_path: Path) -> None:
    async with installs_rig(tmp_path, []) as r:
        workspace = r.slack.installs.add_workspace("T0000AAAA")
        status, page = await add_to_slack(r, workspace)
        assert status == 200, page
        assert r.slack.installs.asked_scopes == [list(DEFAULT_SCOPES)]
        assert r.agent.installs is not None
        found = await r.agent.installs.find("slack", "T0000AAAA")
        assert found is not None and found.value["bot_token"] == workspace.token
        assert found.value["bot_id"] == workspace.bot_id  # Bolt asked auth.test with the new token
        stored = await r.store.stored_install("slack", "T0000AAAA")
        assert stored is not None and workspace.token.encode() not in stored.secret
        files = await asyncio.to_thread(database_files, tmp_path)
        assert files or os.environ.get("NERVE_TEST_STORE") == "postgres"
        assert all(workspace.token.encode() not in held for held in files)  # nowhere in SQLite's files


async def test_a_forged_or_reused_state_is_refused_and_installs_nothing(tmp_path: Path) -> None:
    async with installs_rig(tmp_path, []) as r:
        workspace = r.slack.installs.add_workspace("T0000AAAA")
        r.slack.installs.installing = workspace
        browser = Browser(base_of(r))
        # The install page sets the state cookie and sends the browser to Slack's page.
        status, _, authorize = await browser.get(f"{base_of(r)}/slack/install")
        assert status == 302 and authorize is not None
        _, _, back = await browser.get(authorize)
        assert back is not None
        code = back.split("code=")[1].split("&")[0]
        forged_url = f"{base_of(r)}{REDIRECT_PATH}?code={code}&state=forged"
        assert (await browser.get(forged_url))[0] == 400  # not the browser's state
        own = browser.cookie
        browser.cookie = "slack-app-oauth-state=forged"
        assert (await browser.get(forged_url))[0] == 401  # the browser's, but never issued
        browser.cookie = own
        assert (await browser.get(back))[0] == 200
        assert (await browser.get(back))[0] == 401  # the same state twice: used up
        assert r.agent.installs is not None
        assert [i.workspace for i in await r.agent.installs.all("slack")] == ["T0000AAAA"]


async def test_an_expired_state_is_refused(tmp_path: Path) -> None:
    async with installs_rig(tmp_path, []) as r:
        assert r.agent.installs is not None
        await r.agent.installs.issue_state("old-state", -1.0)
        assert await r.agent.installs.take_state("old-state") is False
        await r.agent.installs.issue_state("new-state", 60.0)
        assert await r.agent.installs.take_state("new-state") is True
        assert await r.agent.installs.take_state("new-state") is False


async def test_two_workspaces_are_answered_with_their_own_tokens_and_never_see_each_other(
    tmp_path: Path,
) -> None:
    async def model(body: dict[str, Any]) -> Reply:
        seen = json.dumps(body["messages"])
        return reply("answer for " + ("A" if "canary-alpha" in seen else "B") + f" ({seen.count('canary')})")

    async with installs_rig(tmp_path, model) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA")
        beta = r.slack.installs.add_workspace("T0000BBBB")
        assert (await add_to_slack(r, alpha))[0] == 200
        assert (await add_to_slack(r, beta))[0] == 200
        first = mention_in(alpha, "remember canary-alpha", channel="C0SAME")
        second = mention_in(beta, "what did I tell you?", channel="C0SAME")  # the same channel id
        assert await r.deliver(first) == 200
        await r.settle()
        assert await r.deliver(second) == 200
        await r.settle()
        [asked_alpha, asked_beta] = r.llm.requests
        assert "canary-alpha" in json.dumps(asked_alpha["messages"])
        assert "canary-alpha" not in json.dumps(asked_beta["messages"])
        by_thread = {
            body.get("thread_ts") or body.get("ts"): token
            for method, token, body in r.slack.installs.tokens
            if method in ("chat.postMessage", "chat.update")
        }
        assert by_thread[first["event"]["ts"]] == alpha.token
        assert by_thread[second["event"]["ts"]] == beta.token
        posted = [
            t for m, t, _ in r.slack.installs.tokens if m.startswith(("chat.", "reactions.", "assistant."))
        ]
        assert posted and set(posted) <= {alpha.token, beta.token}


async def test_an_event_from_a_workspace_without_an_install_is_not_answered(tmp_path: Path) -> None:
    async with installs_rig(tmp_path, []) as r:
        stranger = r.slack.installs.add_workspace("T0000CCCC")  # known to Slack, never installed here
        assert await r.deliver(mention_in(stranger, "hello", channel="C0X")) == 200
        await r.settle()
        assert r.llm.requests == [] and r.slack.posted == []


@pytest.mark.parametrize("event", ["app_uninstalled", "tokens_revoked"])
async def test_uninstalling_deletes_the_workspace_install_and_says_so(
    tmp_path: Path, event: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with installs_rig(tmp_path, []) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA")
        beta = r.slack.installs.add_workspace("T0000BBBB")
        await add_to_slack(r, alpha)
        await add_to_slack(r, beta)
        payload: dict[str, Any] = {"type": event}
        if event == "tokens_revoked":
            payload["tokens"] = {"bot": [alpha.bot_user_id]}
        assert await r.deliver(event_body(payload, team=alpha.team_id)) == 200
        await r.settle()
        assert r.agent.installs is not None
        assert [i.workspace for i in await r.agent.installs.all("slack")] == ["T0000BBBB"]
        assert any("T0000AAAA" in line and "deleted" in line for line in caplog.messages)


async def test_revoking_only_peoples_tokens_keeps_the_bots_install(tmp_path: Path) -> None:
    async with installs_rig(tmp_path, []) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA")
        await add_to_slack(r, alpha)
        revoked = {"type": "tokens_revoked", "tokens": {"oauth": ["U0SOMEONE"]}}
        assert await r.deliver(event_body(revoked, team=alpha.team_id)) == 200
        await r.settle()
        assert r.agent.installs is not None
        assert [i.workspace for i in await r.agent.installs.all("slack")] == ["T0000AAAA"]


async def test_an_organization_wide_install_is_refused_unless_allowed(tmp_path: Path) -> None:
    async with installs_rig(tmp_path, []) as r:
        org = r.slack.installs.add_workspace("T0000ORG1", enterprise_id="E0000ORG1", org_wide=True)
        status, _ = await add_to_slack(r, org)
        assert status != 200
        assert r.agent.installs is not None and await r.agent.installs.all("slack") == []


async def test_an_allowed_organization_install_never_answers_for_another_organization(tmp_path: Path) -> None:
    async with installs_rig(tmp_path, [], slack_allow_org_install=True) as r:
        org = r.slack.installs.add_workspace("T0000ORG1", enterprise_id="E0000ORG1", org_wide=True)
        assert (await add_to_slack(r, org))[0] == 200
        store = r.bot.installs
        assert isinstance(store, InstallationStore)
        mine = await store.async_find_bot(
            enterprise_id="E0000ORG1", team_id="T0000ANY1", is_enterprise_install=True
        )
        assert mine is not None and mine.bot_token == org.token
        # A workspace of that organization, in an event without the org-wide flag.
        within = await store.async_find_bot(enterprise_id="E0000ORG1", team_id="T0000ANY1")
        assert within is not None and within.bot_token == org.token
        other = await store.async_find_bot(
            enterprise_id="E0000ORG2", team_id="T0000ANY2", is_enterprise_install=True
        )
        assert other is None
        assert await store.async_find_bot(enterprise_id="E0000ORG2", team_id="E0000ORG1") is None


async def test_without_oauth_settings_one_token_answers_and_there_is_no_install_page(tmp_path: Path) -> None:
    from tests.test_slack_harness import mention, rig

    async with rig(tmp_path, [reply("hi")]) as r:
        async with r.http.get(r.url.removesuffix(EVENTS_PATH) + "/slack/install") as page:
            assert page.status == 404
        assert await r.deliver(mention("<@UBOT0001> hello")) == 200
        await r.settle()
        assert set(r.slack.installs.used("chat.postMessage")) == {"xoxb-test-token"}


async def test_doctor_lists_the_installed_workspaces_and_checks_each_tokens_scopes(tmp_path: Path) -> None:
    from adapters.doctor.slack_check import check_slack
    from adapters.settings import Settings
    from bot.runtime import open_store

    async with FakeSlack() as slack:
        alpha = slack.installs.add_workspace("T0000AAAA", name="Alpha")
        slack.scopes = [scope for scope in DEFAULT_SCOPES if scope != "users:read"]
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            nerve_db=tmp_path / "doctor.db",
            slack_client_id=slack.installs.client_id,
            slack_client_secret=slack.installs.client_secret,
            slack_signing_secret="signing",
            slack_api_base_url=slack.api_url,
            nerve_secret_key=SECRET_KEY,
        )
        assert [c.found for c in await check_slack(settings) if c.name == "slack installs"] == [
            "no workspace has installed nerve yet"
        ]
        async with open_store(settings) as store:
            installs = workspace_installs(store, SECRET_KEY)
            assert installs is not None
            value = {"bot_token": alpha.token, "team_id": alpha.team_id, "team_name": "Alpha"}
            await installs.keep("slack", "T0000AAAA", value, enterprise="", org_wide=False, name="Alpha")
        checks = await check_slack(settings)
        by_name = {c.name: c for c in checks}
        assert by_name["slack installs"].found == "1 workspace(s): T0000AAAA"
        assert by_name["slack workspace"].status == "ok"
        assert by_name["slack scopes"].status == "warning" and "users:read" in by_name["slack scopes"].found
        assert by_name["slack scopes"].found.startswith("T0000AAAA (Alpha)")
        assert slack.installs.used("auth.test") == [alpha.token]


# --- per-workspace policy ------------------------------------------------------------------------


def test_the_policy_may_name_a_workspace_and_it_applies_there_alone() -> None:
    from adapters.settings import PLATFORMS
    from bot.policy.scopes import Place, Rule, Scopes, rule_name_problem

    assert Place.parse("slack:team:T0123", PLATFORMS) == Place(platform="slack", team="T0123")
    assert rule_name_problem("slack:team:T0123", PLATFORMS) is None
    assert "names more than one thing" in (rule_name_problem("slack:team:T0123:C1", PLATFORMS) or "")
    with pytest.raises(ValueError, match="not installed in workspaces"):
        Place.parse("discord:team:T1", PLATFORMS)
    scopes = Scopes(rules={"slack:team:T0123": Rule(allow=("notes",)), "slack": Rule(allow=("fs",))})
    here = Place(platform="slack", channel="C1", team="T0123", user="U1")
    there = Place(platform="slack", channel="C1", team="T0999", user="U1")
    assert scopes.allows(here, "notes", "add") and not scopes.allows(here, "fs", "read")
    assert scopes.allows(there, "fs", "read") and not scopes.allows(there, "notes", "add")
    # A channel's own rule is still more specific than its workspace's.
    channel_rule = Scopes(rules={"slack:team:T0123": Rule(deny=("fs",)), "slack:C1": Rule(allow=("fs",))})
    assert channel_rule.allows(here, "fs", "read")


async def test_a_workspace_policy_offers_its_tools_in_that_workspace_alone(tmp_path: Path) -> None:
    policy = AgentConfig(scopes=Scopes(rules={"slack:team:T0000AAAA": Rule(deny=("static",))}))
    tools: dict[str, ToolFn] = {"lookup": lambda _args: ToolResult(content="found")}
    async with installs_rig(tmp_path, [reply("a"), reply("b")], tools=tools, config=policy) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA")
        beta = r.slack.installs.add_workspace("T0000BBBB")
        await add_to_slack(r, alpha)
        await add_to_slack(r, beta)
        assert await r.deliver(mention_in(alpha, "hello", channel="C0X")) == 200
        await r.settle()
        assert await r.deliver(mention_in(beta, "hello", channel="C0X")) == 200
        await r.settle()
        offered = [[t["function"]["name"] for t in asked.get("tools") or []] for asked in r.llm.requests]
        assert "lookup" not in offered[0] and "lookup" in offered[1]


async def test_an_event_left_from_before_a_restart_is_answered_with_its_own_workspaces_token(
    tmp_path: Path,
) -> None:
    from adapters.slack.events import inbox_payload

    async with installs_rig(tmp_path, [reply("late answer")]) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA")
        beta = r.slack.installs.add_workspace("T0000BBBB")
        await add_to_slack(r, alpha)
        await add_to_slack(r, beta)
        body = mention_in(beta, "still there?", channel="C0B")
        assert await r.store.claim_event("slack", body["event_id"], inbox_payload(body))
        before = len(r.slack.installs.tokens)
        assert await r.bot.recover() == 1
        await r.settle()
        assert [p.text for p in r.slack.thread("C0B", body["event"]["ts"])] == ["late answer"]
        used = {token for _, token, _ in r.slack.installs.tokens[before:]}
        assert used == {beta.token}
        assert "still there?" in json.dumps(r.llm.requests[0]["messages"])  # its bot's mention stripped
        assert f"<@{beta.bot_user_id}>" not in json.dumps(r.llm.requests[0]["messages"])


def test_add_to_slack_needs_its_secrets_over_http_or_socket_mode() -> None:
    from adapters.slack.installs import oauth_settings
    from adapters.slack.serve import check_settings
    from adapters.slack.settings import SlackSettings
    from bot.errors import ConfigError

    base: dict[str, Any] = {"_env_file": None, "slack_client_id": "1.2", "slack_signing_secret": "s"}
    check_settings(SlackSettings(**base))  # no SLACK_BOT_TOKEN needed
    from adapters.slack.worker import check_settings as check_worker

    check_worker(SlackSettings(**base, nerve_database_url="postgresql://db/nerve"))  # nor for `nerve worker`
    socket: dict[str, Any] = {"_env_file": None, "slack_client_id": "1.2", "slack_app_token": "xapp-1"}
    check_settings(SlackSettings(**socket))  # Socket Mode: no signing secret, no SLACK_BOT_TOKEN
    installs = workspace_installs(object(), SECRET_KEY)
    assert installs is None  # a store that keeps no installs
    with pytest.raises(ConfigError, match="NERVE_SECRET_KEY"):
        oauth_settings(SlackSettings(**base), None)
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN is not set"):
        check_settings(SlackSettings(_env_file=None, slack_signing_secret="s"))  # type: ignore[call-arg]


async def test_a_persons_memories_in_one_workspace_never_reach_the_same_user_id_in_another(
    tmp_path: Path,
) -> None:
    async with installs_rig(tmp_path, [reply("a"), reply("b")], memories=True) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA")
        beta = r.slack.installs.add_workspace("T0000BBBB")
        await add_to_slack(r, alpha)
        await add_to_slack(r, beta)
        # User ids are unique within a workspace only: the same id in both is two people.
        for team, canary in (("T0000AAAA", "canary-memory-alpha"), ("T0000BBBB", "canary-memory-beta")):
            await r.store.add_memory(
                kind="person",
                subject=f"slack:{team}:U0SAME",
                text=f"my code word is {canary}",
                anywhere=True,
                written_by=f"slack:{team}:U0SAME",
                written_in="slack:C0X",
            )
        await r.deliver(mention_in(alpha, "what is my code word?", channel="C0X", user="U0SAME"))
        await r.settle()
        await r.deliver(mention_in(beta, "what is my code word?", channel="C0Y", user="U0SAME"))
        await r.settle()
        [seen_alpha, seen_beta] = [json.dumps(asked["messages"]) for asked in r.llm.requests]
        assert "canary-memory-alpha" in seen_alpha and "canary-memory-beta" not in seen_alpha
        assert "canary-memory-beta" in seen_beta and "canary-memory-alpha" not in seen_beta


async def test_an_approval_that_expires_later_goes_on_with_its_own_workspaces_token(
    tmp_path: Path,
    host: MCPHost,  # noqa: F811  (the fixture)
    notes: Path,  # noqa: F811  (the fixture)
) -> None:
    clock = Clock(1_900_000_000.0)
    steps = [read_and_add(), reply("Nobody approved it.")]
    async with installs_rig(tmp_path, steps, tool_host=host, approvals=True, clock=clock) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA")
        beta = r.slack.installs.add_workspace("T0000BBBB")
        await add_to_slack(r, alpha)
        await add_to_slack(r, beta)
        body = mention_in(beta, "add hi to the note", channel="C0B")
        await r.deliver(body)
        await r.settle()
        root = body["event"]["ts"]
        [approval] = approval_messages(r, root, channel="C0B")
        clock.now += 601
        before = len(r.slack.installs.tokens)
        # The sweep runs on its own, outside any delivery from Slack.
        assert len(await r.bot.sweep()) == 1
        await r.settle()
        assert "Expired" in json.dumps(approval.current["blocks"])
        assert r.slack.thread("C0B", root)[-1].text == "Nobody approved it."
        assert {token for _, token, _ in r.slack.installs.tokens[before:]} == {beta.token}
        assert ran(notes) == ["read_note"]


def org_mention(workspace: FakeWorkspace, enterprise: str, text: str, *, channel: str) -> dict[str, Any]:
    """An event from a workspace of an Enterprise Grid organization the app is installed in as a whole."""
    body = mention_in(workspace, text, channel=channel)
    body["enterprise_id"] = enterprise
    body["is_enterprise_install"] = True
    body["authorizations"] = [
        {
            "enterprise_id": enterprise,
            "team_id": None,
            "user_id": workspace.bot_user_id,
            "is_bot": True,
            "is_enterprise_install": True,
        }
    ]
    return body


async def test_an_organization_wide_install_answers_its_organization_and_no_other(tmp_path: Path) -> None:
    async with installs_rig(tmp_path, [reply("org answer")], slack_allow_org_install=True) as r:
        org = r.slack.installs.add_workspace("T0000ORG1", enterprise_id="E0000ORG1", org_wide=True)
        stranger = r.slack.installs.add_workspace("T0000ORG2", enterprise_id="E0000ORG2", org_wide=True)
        assert (await add_to_slack(r, org))[0] == 200
        assert r.agent.installs is not None
        [install] = await r.agent.installs.all("slack")
        assert (install.workspace, install.enterprise, install.org_wide) == ("E0000ORG1", "E0000ORG1", True)
        mine = org_mention(org, "E0000ORG1", "hello", channel="C0ORG")
        assert await r.deliver(mine) == 200
        await r.settle()
        assert [p.text for p in r.slack.thread("C0ORG", mine["event"]["ts"])] == ["org answer"]
        assert set(r.slack.installs.used("chat.postMessage")) == {org.token}
        # Later work for that workspace (after a restart too) finds the organization's install.
        restarted = InstallationStore(r.agent.installs, allow_org=True)
        assert await restarted.bot_token("T0000ORG1") == org.token
        assert await restarted.bot_token("T0000ORG2") is None
        # Another organization (never installed) is not answered, with this install or any.
        assert await r.deliver(org_mention(stranger, "E0000ORG2", "hello", channel="C0OTHER")) == 200
        await r.settle()
        assert len(r.llm.requests) == 1


async def test_a_schedule_runs_with_its_own_workspaces_token(tmp_path: Path) -> None:
    from dataclasses import replace

    from tests.test_slack_schedules import NOW, a_schedule, runs

    async with installs_rig(tmp_path, [reply("All green.")]) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA")
        beta = r.slack.installs.add_workspace("T0000BBBB")
        await add_to_slack(r, alpha)
        await add_to_slack(r, beta)
        made = a_schedule("check the deploy", NOW - 60, channel="C0B", rule="FREQ=DAILY")
        owner = f"slack:{beta.team_id}:U0ALICE"
        due = replace(made, key=replace(made.key, workspace=beta.team_id), owner=owner)
        await r.store.add_schedule(due)
        before = len(r.slack.installs.tokens)
        runner = r.bot.schedules.start(clock=Clock(NOW), forever=False)
        await runs(runner)
        [announced] = r.slack.thread("C0B", None)
        assert any("All green." in p.text for p in r.slack.thread("C0B", announced.ts))
        assert {token for _, token, _ in r.slack.installs.tokens[before:]} == {beta.token}
