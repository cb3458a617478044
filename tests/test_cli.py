"""The `nerve` command as a user runs it: a real process, real MCP servers, a fake model over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from adapters import cli
from bot.config import Settings
from bot.errors import StartupError
from tests.conftest import ROOT
from tests.fakes.llm_server import FakeCall, FakeLLMServer, Reply, own_text, reply, tool_reply

SEED_QUESTION = "Is the environment in A1001 good for a run near 31.23, 121.47?"


def shipped_servers(*names: str) -> dict[str, Any]:
    """The entries of the repository's servers file (only `names` when given), run from its folder,
    each server started warm: the same module's `main` (`tests/mcp_servers/warm_start.py`)."""
    servers: dict[str, Any] = json.loads((ROOT / "mcp.json").read_text())["mcpServers"]
    return {name: warm(server) for name, server in servers.items() if not names or name in names}


def warm(server: dict[str, Any]) -> dict[str, Any]:
    """A servers-file entry of one of nerve's servers (`python -m servers.<name>`) with its warm
    stand-in (`python -m tests.mcp_servers.<name>`); everything else as it is."""
    args = list(server.get("args", []))
    if args[:1] == ["-m"] and len(args) > 1 and args[1].startswith("servers."):
        args[1] = "tests.mcp_servers." + args[1].removeprefix("servers.")
        return {**server, "command": sys.executable, "args": args, "cwd": str(ROOT)}
    return {**server, "cwd": str(ROOT)}


# nerve's own tools, offered before any server's.
BUILT_IN_TOOLS = (
    "remember",
    "recall",
    "forget",
    "schedule",
    "list_schedules",
    "cancel_schedule",
    # Offered in a conversation with shared files only; listed, like every tool nerve may offer.
    "read_attachment",
    "search_attachment",
)


def nerve_env(tmp_path: Path, *, servers: dict[str, Any] | None = None, **extra: str) -> dict[str, str]:
    """The environment of a `nerve` process on its own database; the shipped servers (started warm)
    unless `servers` names the only ones the test needs (`{}` when it uses no tool): every command
    that answers starts each server of its file, a process of its own."""
    config = servers_file(tmp_path, shipped_servers() if servers is None else servers, "needed-servers.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "NERVE_"))}
    env.update({"NERVE_DB": str(tmp_path / "nerve.db"), "NERVE_MCP_CONFIG": str(config), **extra})
    return env


# `python -m bot`, started warm (`tests/warm_nerve`): a real process, but nerve imported beforehand.
WARM_NERVE = (sys.executable, "-m", "tests.warm_nerve")


async def run_nerve(
    *args: str | bytes, env: dict[str, str], stdin: str = "", command: tuple[str, ...] | None = None
) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *(command or WARM_NERVE),
        *args,
        env=env,
        cwd=str(ROOT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin.encode()), 90)
    return process.returncode or 0, out.decode(), err.decode()


def servers_file(tmp_path: Path, servers: dict[str, Any], name: str = "mcp.json") -> Path:
    config = tmp_path / name
    config.write_text(json.dumps({"mcpServers": servers}))
    return config


TESTKIT = {
    "command": sys.executable,
    "args": ["-m", "tests.mcp_servers.testkit"],
    "cwd": str(ROOT),
    "trustAnnotations": True,
}


async def test_tools_json_lists_both_seed_tools_in_openai_form(tmp_path):
    code, out, err = await run_nerve("tools", "--json", env=nerve_env(tmp_path))
    assert code == 0, err
    tools = json.loads(out)
    # nerve's own memory, schedule and file tools first, then the servers'.
    own = len(BUILT_IN_TOOLS)
    assert [t["function"]["name"] for t in tools][:own] == [*BUILT_IN_TOOLS]
    assert {t["function"]["name"] for t in tools[own:]} == {"get_environment_status", "simulate_geolocation"}
    for tool in tools:
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
    geo = next(t for t in tools if t["function"]["name"] == "simulate_geolocation")["function"]
    assert geo["parameters"]["properties"]["lat"]["maximum"] == 90
    assert geo["description"].startswith("Where a pair of coordinates is")  # the mcp.json override (S3)


async def test_the_seed_question_calls_both_tools_at_once_through_a_real_model_endpoint(tmp_path):
    script = [
        tool_reply(
            FakeCall(name="get_environment_status", arguments='{"area_code": "A1001"}', id="call_env"),
            FakeCall(
                name="simulate_geolocation",
                arguments='{"lat": 31.23, "lng": 121.47, "radius": 500}',
                id="call_geo",
            ),
        ),
        reply("Air is fine and Century Park is close: go for it."),
    ]
    async with FakeLLMServer(script) as model:
        env = nerve_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MODEL="test-model")
        code, out, err = await run_nerve("ask", "--json", SEED_QUESTION, env=env)
        model.assert_complete()
        second = model.requests[1]

    assert code == 0, err
    answer = json.loads(out)
    assert answer["text"] == "Air is fine and Century Park is close: go for it."
    assert [c["name"] for c in answer["tool_calls"]] == ["get_environment_status", "simulate_geolocation"]
    assert not any(c["is_error"] for c in answer["tool_calls"])
    results = {m["tool_call_id"]: m["content"] for m in second["messages"] if m["role"] == "tool"}
    assert '"area_code": "A1001"' in results["call_env"]
    assert "Century Park" in results["call_geo"]
    assert second["model"] == "test-model"


async def test_the_offline_model_answers_the_seed_question_with_both_results(tmp_path):
    code, out, err = await run_nerve("ask", "--json", SEED_QUESTION, env=nerve_env(tmp_path))
    assert code == 0, err
    answer = json.loads(out)
    assert {c["name"] for c in answer["tool_calls"]} == {"get_environment_status", "simulate_geolocation"}
    assert "AQI" in answer["text"] and "Park" in answer["text"]


async def test_a_restarted_chat_continues_the_thread(tmp_path):
    env = nerve_env(tmp_path, servers=shipped_servers("env-query"))
    code, _, err = await run_nerve("chat", "--thread", "walks", env=env, stdin="How is the air in A1001?\n")
    assert code == 0, err
    code, out, err = await run_nerve("chat", "--thread", "walks", env=env, stdin="/quit\n")
    assert code == 0, err
    assert "Continuing this thread" in out and "How is the air in A1001?" in out
    code, out, _ = await run_nerve("history", "--thread", "walks", env=env)
    assert "get_environment_status" in out and "you: How is the air in A1001?" in out


async def test_a_bad_servers_file_fails_at_start_naming_file_server_and_field(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"weather": {"command": "x", "timeout": "soon"}}}))
    code, _, err = await run_nerve("tools", env=nerve_env(tmp_path, NERVE_MCP_CONFIG=str(config)))
    assert code == 2
    assert str(config) in err and "server 'weather'" in err and "'timeout'" in err
    assert "Traceback" not in err


async def test_a_turn_killed_mid_round_leaves_a_thread_the_model_api_accepts(tmp_path):
    config = tmp_path / "mcp.json"
    loop_server = {
        "command": sys.executable,
        "args": ["-m", "tests.mcp_servers.loop"],
        "cwd": str(ROOT),
        "trustAnnotations": True,
    }
    config.write_text(json.dumps({"mcpServers": {"loop": loop_server}}))
    second_request = asyncio.Event()

    def responder(body: dict) -> Reply:
        if len(body["messages"]) == 2 and own_text(body["messages"][-1]["content"]) == "first":
            return tool_reply(FakeCall(name="wait_and_echo", arguments='{"label": "a"}', id="call_a"))
        if body["messages"][-1]["role"] == "tool":
            second_request.set()
            return reply("never delivered", delay=30)
        return reply("answered after the restart")

    async with FakeLLMServer(responder, strict=False) as model:
        # The killed turn holds its conversation until its lease runs out: a short one, so the
        # second `nerve ask` takes over in seconds instead of the default 20.
        env = nerve_env(
            tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=str(config), NERVE_TURN_LEASE="4"
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "ask",
            "first",
            "--thread",
            "killed",
            env=env,
            cwd=str(ROOT),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await asyncio.wait_for(second_request.wait(), 60)
        process.send_signal(signal.SIGKILL)
        await process.wait()

        with sqlite3.connect(tmp_path / "nerve.db") as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            roles = [row[0] for row in db.execute("SELECT role FROM messages ORDER BY id")]
        assert roles == ["user", "assistant", "tool"], "the round landed whole before the kill"

        code, out, err = await run_nerve("ask", "--json", "second", "--thread", "killed", env=env)
        sent = model.requests[-1]["messages"]

    assert code == 0, err
    assert json.loads(out)["text"] == "answered after the restart"
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "user"]
    assert sent[2]["tool_calls"][0]["id"] == sent[3]["tool_call_id"] == "call_a"


# --- the default command --------------------------------------------------------------------------


async def test_python_dash_m_bot_without_a_subcommand_starts_the_chat(tmp_path):
    code, out, err = await run_nerve(env=nerve_env(tmp_path, servers={}), stdin="/quit\n")
    assert code == 0, err
    assert "nerve — thread default" in out
    assert "Traceback" not in err


async def test_the_nerve_command_without_a_subcommand_starts_the_chat(tmp_path):
    script = shutil.which("nerve", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the nerve console script is not installed next to this interpreter")
    code, out, err = await run_nerve(env=nerve_env(tmp_path), stdin="", command=(script,))
    assert code == 0, err
    assert "nerve — thread default" in out
    assert "Traceback" not in err


# --- history needs only the database ------------------------------------------------------------


async def test_history_reads_the_database_without_a_servers_file(tmp_path):
    env = nerve_env(tmp_path, servers=shipped_servers("env-query"))
    code, _, err = await run_nerve("ask", "How is the air in A1001?", "--thread", "kept", env=env)
    assert code == 0, err
    broken = tmp_path / "broken.json"
    broken.write_text("{ not json")
    for config in (tmp_path / "missing.json", broken):
        code, out, err = await run_nerve(
            "history", "--thread", "kept", env={**env, "NERVE_MCP_CONFIG": str(config)}
        )
        assert code == 0, err
        assert "you: How is the air in A1001?" in out and "get_environment_status" in out


# --- invalid text in a question -----------------------------------------------------------------


async def test_ask_answers_a_question_with_invalid_utf8_bytes_and_stores_it_readably(tmp_path):
    env = nerve_env(tmp_path, servers=shipped_servers("env-query"))
    question = b"How is the air in A1001? caf\xe9 \xff"
    code, out, err = await run_nerve("ask", "--json", question, "--thread", "bytes", env=env)
    assert code == 0, err
    assert "AQI" in json.loads(out)["text"]
    code, out, err = await run_nerve("history", "--thread", "bytes", env=env)
    assert code == 0, err
    assert "you: How is the air in A1001? caf\ufffd \ufffd" in out


async def test_ask_answers_a_question_with_a_lone_surrogate(tmp_path):
    env = nerve_env(tmp_path, servers=shipped_servers("env-query"))
    # U+D800 as a terminal or a careless encoder writes it: "\xed\xa0\x80" is no valid UTF-8.
    lone = "How is the air in A1001? \ud800".encode("utf-8", "surrogatepass")
    code, out, err = await run_nerve("ask", lone, "--thread", b"t\xed\xa0\x80", env=env)
    assert code == 0, err
    assert "AQI" in out and "Traceback" not in err
    code, out, err = await run_nerve("history", "--thread", b"t\xed\xa0\x80", env=env)
    assert code == 0, err
    assert "you: How is the air in A1001? \ufffd" in out


# --- text from tools and the model is shown, never obeyed by the terminal -----------------------

HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J"


async def test_ask_tools_and_history_print_no_escape_sequence_from_tools_or_the_model(tmp_path):
    broken = {"command": "sh", "args": ["-c", f"printf '{HOSTILE} gone\\n' >&2; exit 3"]}
    kit = {**TESTKIT, "tools": {"echo": {"description": f"Echo {HOSTILE} text."}}}
    config = servers_file(tmp_path, {"kit": kit, "broken": broken})
    script = [
        tool_reply(FakeCall(name="echo", arguments=json.dumps({"text": f"tool {HOSTILE} said"}), id="c1")),
        reply(f"model {HOSTILE} said"),
        tool_reply(FakeCall(name="echo", arguments=json.dumps({"text": f"tool {HOSTILE} said"}), id="c2")),
        reply(f"model {HOSTILE} said"),
    ]
    async with FakeLLMServer(script) as model:
        env = nerve_env(tmp_path, OPENAI_BASE_URL=model.base_url, NERVE_MCP_CONFIG=str(config))
        outputs = []
        asked = ("--thread", "hostile")
        for args in (
            ("ask", "echo it", *asked),
            ("ask", "--json", "echo it", *asked),
            ("history", *asked),
            ("tools",),
        ):
            code, out, err = await run_nerve(*args, env=env)
            assert code == 0, err
            outputs.append(out)
        model.assert_complete()
    ask, ask_json, history, tools = outputs
    assert "model " in ask and "tool " in history and "Echo " in tools
    for out in outputs:
        assert "\x1b" not in out and "\x07" not in out, out
    answer = json.loads(ask_json)
    assert answer["text"] == f"model {HOSTILE} said", "--json keeps the text exact, JSON-escaped"


# --- the top-level net --------------------------------------------------------------------------


def test_a_start_up_error_inside_a_task_group_is_reported_in_one_plain_line(monkeypatch, capsys, tmp_path):
    """Front ends start their parts in task groups; the typed error inside still reaches the user."""

    async def failing_start(settings: Settings) -> int:
        async with asyncio.TaskGroup() as group:
            group.create_task(asyncio.sleep(0))
            raise StartupError("cannot reach Slack at http://127.0.0.1:9/api/: check the network")

    for name, value in nerve_env(tmp_path, servers={}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cli, "_job", lambda args, settings, notices, stop: failing_start)
    code = cli.main(["slack"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "nerve: cannot reach Slack at http://127.0.0.1:9/api/: check the network\n"


def test_an_unexpected_error_still_shows_its_traceback(monkeypatch, tmp_path):
    async def broken(settings: Settings) -> int:
        raise RuntimeError("a bug")

    for name, value in nerve_env(tmp_path, servers={}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(cli, "_job", lambda args, settings, notices, stop: broken)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["tools"])


# --- what a place is offered --------------------------------------------------------------------


def seed_file_with_policy(tmp_path: Path, policy: dict[str, Any]) -> Path:
    """The repository's servers file, run from its own folder, with a policy section added."""
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": shipped_servers(), "policy": policy}))
    return path


async def test_tools_for_a_place_lists_only_what_the_policy_offers_there(tmp_path):
    policy = {"*": {"allow": ["env-query"]}, "slack:C123": {"deny": ["env-query"]}}
    env = nerve_env(tmp_path, NERVE_MCP_CONFIG=str(seed_file_with_policy(tmp_path, policy)))

    offered = {}
    for place in ("slack:C123", "slack:C123:user:U1", "discord:dm", "terminal"):
        code, out, err = await run_nerve("tools", "--json", "--place", place, env=env)
        assert code == 0, err
        offered[place] = [t["function"]["name"] for t in json.loads(out)]
    code, out, err = await run_nerve("tools", "--json", env=env)
    assert code == 0, err
    everywhere = {t["function"]["name"] for t in json.loads(out)}

    # The "*" rule's allow list leaves out nerve's own tools; slack:C123's rule only denies.
    memory = [*BUILT_IN_TOOLS]
    assert offered == {
        "slack:C123": [*memory, "simulate_geolocation"],
        "slack:C123:user:U1": [*memory, "simulate_geolocation"],
        "discord:dm": ["get_environment_status"],
        "terminal": ["get_environment_status"],
    }
    assert everywhere == {*memory, "get_environment_status", "simulate_geolocation"}


async def test_tools_for_a_place_say_which_rule_decides_and_what_is_held_back(tmp_path):
    policy = {"slack:C123": {"deny": ["env-query/*"]}}
    env = nerve_env(tmp_path, NERVE_MCP_CONFIG=str(seed_file_with_policy(tmp_path, policy)))

    code, out, err = await run_nerve("tools", "--place", "slack:C123", env=env)
    assert code == 0, err
    assert "Policy rule 'slack:C123' decides here." in out
    assert "simulate_geolocation" in out
    assert "Not offered here: env-query/get_environment_status" in out

    code, out, err = await run_nerve("tools", "--place", "discord:C5", env=env)
    assert code == 0, err
    assert "No policy rule applies here: every tool is offered." in out
    assert "get_environment_status" in out and "Not offered here" not in out


async def test_a_place_nerve_cannot_read_is_a_usage_error_that_says_what_to_write(tmp_path):
    code, out, err = await run_nerve("tools", "--place", "slak:C123", env=nerve_env(tmp_path))
    assert code == 2 and out == ""
    assert "--place" in err and "must start with one of slack, discord, terminal" in err
    assert "Traceback" not in err


async def test_tools_help_documents_how_to_write_a_place(tmp_path):
    code, out, _ = await run_nerve("tools", "--help", env=nerve_env(tmp_path))
    assert code == 0
    assert "--place PLACE" in out and "slack:C123:user:U1" in out and "guild:ID" in out


async def test_tools_says_which_tools_ask_before_running(tmp_path):
    trust = {
        "command": sys.executable,
        "trustAnnotations": True,
        "args": ["-m", "tests.mcp_servers.trust", str(tmp_path / "notes.txt")],
        "cwd": str(ROOT),
    }
    config = servers_file(tmp_path, {"notes": {**trust, "tools": {"peek": {"approval": "always"}}}})

    code, out, err = await run_nerve("tools", env=nerve_env(tmp_path, NERVE_MCP_CONFIG=str(config)))

    assert code == 0, err
    lines = {line.split(" ")[0]: line for line in out.splitlines() if line and not line.startswith(" ")}
    assert "asks before running" not in lines["read_note"]
    for name in ("append_note", "delete_note", "peek"):
        assert "asks before running" in lines[name], lines[name]
