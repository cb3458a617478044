"""Agent sessions in the Slack fake: `agents.sessions.setStatus` and `agents.sessions.rename` with the
arguments and limits Slack documents (docs.slack.dev/ai/agent-sessions), and the events of the Agent
messaging experience (`app_home_opened`, `agent_session_stopped`) as Slack delivers them.

- Only an app declared as an agent may create sessions (declaring adds `assistant:write`); the
  methods need a bot token with `chat:write`. `app_not_agent` is this fake's own word for the first.
- status: one of processing, active, suspended, closed; title: at most 200 characters (rename: 1 to
  200); title and initiator_user_id count only when the call creates the session.
- While the app is not subscribed to `agent_session_stopped`, setStatus answers with the warning
  `missing_agent_session_stopped_event_subscription`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

STATUSES = frozenset({"processing", "active", "suspended", "closed"})
TITLE_LIMIT = 200


@dataclass
class FakeSession:
    """One thread's session: its title, who started it, and every status it was given, in order."""

    channel: str
    thread_ts: str
    title: str | None
    initiator: str | None
    statuses: list[str] = field(default_factory=list)
    titles: list[str] = field(default_factory=list)


class FakeSessions:
    """The sessions Slack keeps for the app, and whether the app may have any."""

    def __init__(self) -> None:
        self.agent = True  # the app is declared as an agent (its manifest has agent_view)
        self.stop_subscribed = True  # subscribed to agent_session_stopped
        self.sessions: dict[tuple[str, str], FakeSession] = {}

    def statuses(self, channel: str, thread_ts: str) -> list[str]:
        found = self.sessions.get((channel, thread_ts))
        return list(found.statuses) if found is not None else []

    def answer(self, method: str, body: dict[str, Any], scopes: list[str] | None) -> dict[str, Any]:
        if scopes is not None and "chat:write" not in scopes:
            return {"ok": False, "error": "missing_scope", "needed": "chat:write"}
        if not self.agent or (scopes is not None and "assistant:write" not in scopes):
            return {"ok": False, "error": "app_not_agent"}
        channel, thread = str(body.get("channel_id") or ""), str(body.get("thread_ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not thread:
            return {"ok": False, "error": "invalid_thread_ts"}
        if method == "agents.sessions.rename":
            return self._rename(channel, thread, body)
        return self._set_status(channel, thread, body)

    def _set_status(self, channel: str, thread: str, body: dict[str, Any]) -> dict[str, Any]:
        status = body.get("status")
        if status not in STATUSES:
            return {"ok": False, "error": "invalid_status"}
        title = body.get("title")
        if title is not None and (not isinstance(title, str) or len(title) > TITLE_LIMIT):
            return {"ok": False, "error": "invalid_title"}
        session = self.sessions.get((channel, thread))
        if session is None:
            initiator = body.get("initiator_user_id")
            session = FakeSession(channel, thread, title, str(initiator) if initiator else None)
            self.sessions[(channel, thread)] = session
        session.statuses.append(str(status))
        answer: dict[str, Any] = {"ok": True, "status": status, "title": session.title}
        if not self.stop_subscribed:
            answer["warning"] = "missing_agent_session_stopped_event_subscription"
        return answer

    def _rename(self, channel: str, thread: str, body: dict[str, Any]) -> dict[str, Any]:
        title = body.get("title")
        if not isinstance(title, str) or not 1 <= len(title) <= TITLE_LIMIT:
            return {"ok": False, "error": "invalid_title"}
        session = self.sessions.get((channel, thread))
        if session is None:
            return {"ok": False, "error": "session_not_found"}
        session.title = title
        session.titles.append(title)
        return {"ok": True, "title": title}


def home_opened(user: str, channel: str, tab: str = "messages", team: str = "T0000TEAM") -> dict[str, Any]:
    """An `app_home_opened` delivery: the person opened the app's Messages (or Home) tab."""
    event = {"type": "app_home_opened", "user": user, "channel": channel, "tab": tab, "event_ts": "1.0"}
    return {"type": "event_callback", "team_id": team, "event_id": f"EvHome{channel}{tab}", "event": event}


def stop_pressed(
    user: str, channel: str, thread_ts: str, streams: list[str], team: str = "T0000TEAM"
) -> dict[str, Any]:
    """An `agent_session_stopped` delivery: the person pressed the stop button of a `processing`
    session; `streams` are the streaming messages Slack stopped in answer to the click."""
    event = {
        "type": "agent_session_stopped",
        "channel": channel,
        "thread_ts": thread_ts,
        "user": user,
        "streaming_message_ts": streams,
        "event_ts": "2.0",
    }
    return {"type": "event_callback", "team_id": team, "event_id": f"EvStop{thread_ts}", "event": event}
