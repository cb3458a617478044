"""Uninstalls. On Enterprise Grid the app removed from one workspace of an organization
(`app_uninstalled_team`, `team_access_revoked`) stops being answered there, and the organization's
other workspaces keep it; with one bot token an uninstall is said in the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.slack.installs import InstallationStore
from tests.fakes.llm_server import reply
from tests.fakes.slack_installs import APP_ID
from tests.test_slack_harness import event_body
from tests.test_slack_installs import add_to_slack, installs_rig, org_mention

ORG = "E0000ORG1"


def removed_from(team: str, *, app: str = APP_ID, org_wide: bool = True) -> dict[str, Any]:
    """`app_uninstalled_team` as Slack documents it: the event names the app and the team it left."""
    event = {
        "type": "app_uninstalled_team",
        "app_id": app,
        "app_name": "nerve",
        "app_owner_id": "U0OWNER",
        "user_id": "U0ADMIN",
        "team_id": team,
        "team_domain": "acme",
        "event_ts": "1700001891.279278",
    }
    body = event_body(event, team=team)
    body["enterprise_id"] = ORG
    installed = None if org_wide else team
    body["authorizations"] = [
        {"enterprise_id": ORG, "team_id": installed, "is_bot": True, "is_enterprise_install": org_wide}
    ]
    return body


async def test_an_org_app_removed_from_one_workspace_stops_answering_there_and_keeps_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    steps = [reply("one"), reply("two")]
    async with installs_rig(tmp_path, steps, slack_allow_org_install=True) as r:
        org = r.slack.installs.add_workspace("T0000ORG1", enterprise_id=ORG, org_wide=True)
        assert (await add_to_slack(r, org))[0] == 200
        for team, channel in (("T0000ORG1", "C0ONE"), ("T0000ORG2", "C0TWO")):
            body = org_mention(org, ORG, "hello", channel=channel)
            body["team_id"] = body["event"]["team"] = team
            assert await r.deliver(body) == 200
            await r.settle()
        store = r.bot.installs
        assert isinstance(store, InstallationStore)
        assert await store.bot_token("T0000ORG2") == org.token

        # Another app's removal (admin events name any app) changes nothing.
        assert await r.deliver(removed_from("T0000ORG2", app="A0OTHERAPP")) == 200
        await r.settle()
        assert await store.bot_token("T0000ORG2") == org.token

        assert await r.deliver(removed_from("T0000ORG2")) == 200
        await r.settle()
        assert await store.bot_token("T0000ORG2") is None  # a schedule there finds no token
        assert await store.bot_token("T0000ORG1") == org.token
        assert r.agent.installs is not None
        assert [i.workspace for i in await r.agent.installs.all("slack")] == [ORG]
        assert any("T0000ORG2" in line and "app_uninstalled_team" in line for line in caplog.messages)

        # team_access_revoked names the workspaces it left.
        revoked = event_body({"type": "team_access_revoked", "team_ids": ["T0000ORG1"]}, team="T0000ORG1")
        revoked["enterprise_id"] = ORG
        assert await r.deliver(revoked) == 200
        await r.settle()
        assert await store.bot_token("T0000ORG1") is None
        # Removed from the organization itself: its install is deleted.
        assert await r.deliver(removed_from(ORG)) == 200
        await r.settle()
        assert await r.agent.installs.all("slack") == []


async def test_a_workspace_install_of_an_organization_is_deleted_when_the_app_leaves_that_workspace(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with installs_rig(tmp_path, []) as r:
        alpha = r.slack.installs.add_workspace("T0000AAAA", enterprise_id=ORG)
        beta = r.slack.installs.add_workspace("T0000BBBB", enterprise_id=ORG)
        await add_to_slack(r, alpha)
        await add_to_slack(r, beta)
        assert await r.deliver(removed_from("T0000AAAA", org_wide=False)) == 200
        await r.settle()
        assert r.agent.installs is not None
        assert [i.workspace for i in await r.agent.installs.all("slack")] == ["T0000BBBB"]
        assert any("T0000AAAA" in line and "deleted" in line for line in caplog.messages)


async def test_with_one_bot_token_an_uninstall_is_logged_as_the_token_no_longer_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.test_slack_harness import rig

    async with rig(tmp_path, []) as r:
        assert await r.deliver(event_body({"type": "app_uninstalled"})) == 200
        await r.settle()
        assert any("app_uninstalled" in line and "SLACK_BOT_TOKEN" in line for line in caplog.messages)
