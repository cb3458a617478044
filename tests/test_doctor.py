"""`nerve doctor` as an operator runs it: a real process, real MCP servers and SQLite, and the model
service, Slack and Discord faked at the network boundary.

Every setup runs once, all at the same time (they share nothing but the fakes), in a module
fixture; each test then reads the line that explains its setup and the exit code.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from adapters.doctor.report import Check, Redactor
from adapters.doctor.slack_check import AGENT_EXPERIENCE, NEEDED_SCOPES
from bot.store.migrate import DEFAULT_MIGRATIONS_DIR, discover
from bot.store.postgres import describe
from tests.conftest import ROOT
from tests.fakes.discord_api import FakeDiscord
from tests.fakes.llm_server import FakeLLMServer
from tests.fakes.slack_api import FakeSlack
from tests.ports import unused_port
from tests.stores import PostgresBackend, postgres_backend
from tests.test_cli import WARM_NERVE

# Mixed-case letters, so no piece of one can turn up in a report by chance.
MODEL_KEY = "sk-QvXrMzLpKtWbHnJd"
WRONG_KEY = "sk-GyUoIeAsDfPhKwQz"
SLACK_BOT = "xoxb-NmBvCxZlKjHgFdSa"
SLACK_APP = "xapp-PoIuYtReWqLkJhGf"
SLACK_SECRET = "MnBvCxZaSdFgHjKlPoIu"
DISCORD_TOKEN = "QwErTyUiOpAsDfGhJkLz.ZxCvBn"
DISCORD_WRONG = "LkJhGfDsApOiUyTrEwQm.MnBvCx"
URL_PASSWORD = "ZaQwSxCdErFvBgTy"
SECRETS = (
    MODEL_KEY,
    WRONG_KEY,
    SLACK_BOT,
    SLACK_APP,
    SLACK_SECRET,
    DISCORD_TOKEN,
    DISCORD_WRONG,
    URL_PASSWORD,
)
SCHEMA = discover(DEFAULT_MIGRATIONS_DIR)[-1].version
INTENT = 1 << 19  # GATEWAY_MESSAGE_CONTENT_LIMITED: an unverified bot with the intent switched on


@dataclass(frozen=True, slots=True)
class Run:
    code: int
    out: str
    err: str
    folder: Path

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


def row(status: str, name: str, found: str, todo: str | None = None, width: int = 15) -> str:
    """One report line as an operator reads it: status, name, what was found → what to do."""
    text = f"{status:<8} {name:<{width}}  {found}"
    return f"{text} → {todo}" if todo else text


def clean_env(**extra: str) -> dict[str, str]:
    """This machine's environment without any nerve, model, Slack or Discord setting, plus `extra`."""
    prefixes = ("OPENAI_", "NERVE_", "SLACK_", "DISCORD_")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(prefixes)}, **extra}


def no_servers(folder: Path) -> Path:
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {}}))
    return path


async def doctor(folder: Path, *args: str, **env: str) -> Run:
    """`nerve doctor` in `folder` (its own database, no .env unless the setup wrote one)."""
    env.setdefault("NERVE_DB", str(folder / "nerve.db"))
    if "NERVE_MCP_CONFIG" not in env:
        env["NERVE_MCP_CONFIG"] = str(no_servers(folder))
    # Started warm (`tests/warm_nerve`), found from `folder` through PYTHONPATH.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    process = await asyncio.create_subprocess_exec(
        *WARM_NERVE,
        "doctor",
        *args,
        env=clean_env(**env),
        cwd=str(folder),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return Run(process.returncode or 0, out.decode(), err.decode(), folder)


Setup = Callable[[Path], Coroutine[Any, Any, Run]]


@dataclass(slots=True)
class Fakes:
    model: FakeLLMServer
    slack: FakeSlack
    slack_refusing: FakeSlack
    slack_narrow: FakeSlack
    discord: FakeDiscord
    discord_no_intent: FakeDiscord
    # A schema of its own on the test PostgreSQL, migrated by nerve beforehand.
    postgres: PostgresBackend


def slack_env(slack: FakeSlack) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": SLACK_BOT, "SLACK_APP_TOKEN": SLACK_APP, "SLACK_API_BASE_URL": slack.api_url}


def discord_env(discord: FakeDiscord, token: str = DISCORD_TOKEN) -> dict[str, str]:
    return {
        "DISCORD_BOT_TOKEN": token,
        "DISCORD_API_BASE_URL": discord.api_base_url,
        "NERVE_DISCORD_MESSAGE_CONTENT": "true",
    }


def setups(fakes: Fakes) -> dict[str, Setup]:
    model_env = {
        "OPENAI_BASE_URL": fakes.model.base_url,
        "OPENAI_API_KEY": MODEL_KEY,
        "NERVE_MODEL": "test-model",
    }
    seed = str(ROOT / "mcp.json")

    async def all_good(folder: Path, *args: str) -> Run:
        return await doctor(
            folder,
            *args,
            NERVE_MCP_CONFIG=seed,
            **model_env,
            **slack_env(fakes.slack),
            **discord_env(fakes.discord),
        )

    async def bad_json(folder: Path) -> Run:
        (folder / "mcp.json").write_text('{"mcpServers": {"env-query": {"command": "python",}}}')
        return await doctor(folder, NERVE_MCP_CONFIG=str(folder / "mcp.json"))

    async def missing_command(folder: Path) -> Run:
        servers = {
            "gone": {"command": "nerve-no-such-command", "args": ["--serve"]},
            "env-query": {"command": "python", "args": ["-m", "servers.env_query"], "cwd": str(ROOT)},
        }
        (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        return await doctor(folder, NERVE_MCP_CONFIG=str(folder / "mcp.json"))

    async def failing_server(folder: Path) -> Run:
        says = "import sys; print('starting', file=sys.stderr); sys.exit('cannot open /srv/notes: no folder')"
        servers = {"notes": {"command": sys.executable, "args": ["-c", says]}}
        (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        return await doctor(folder, NERVE_MCP_CONFIG=str(folder / "mcp.json"))

    async def offline_model_for_slack(folder: Path) -> Run:
        return await doctor(folder, **slack_env(fakes.slack))

    async def repeated_server(folder: Path) -> Run:
        # MCPSecBench's example file: a second "check" would quietly replace the first.
        entry = '{"command": "python", "args": ["-m", "servers.env_query"], "enabled": false}'
        (folder / "mcp.json").write_text(f'{{"mcpServers": {{"check": {entry}, "check": {entry}}}}}')
        return await doctor(folder, NERVE_MCP_CONFIG=str(folder / "mcp.json"))

    async def lookalike_servers(folder: Path) -> Run:
        entry = {"command": "python", "args": ["-m", "servers.env_query"], "enabled": False}
        servers = {"Check": entry, "check": entry, "my-server": entry, "my_server": entry}
        (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        return await doctor(folder, NERVE_MCP_CONFIG=str(folder / "mcp.json"))

    async def unreachable_model(folder: Path) -> Run:
        # Credentials in the URL are never shown either.
        return await doctor(
            folder, OPENAI_BASE_URL=f"http://nerve:{URL_PASSWORD}@127.0.0.1:{unused_port()}/v1"
        )

    async def rejected_key(folder: Path) -> Run:
        return await doctor(folder, **{**model_env, "OPENAI_API_KEY": WRONG_KEY})

    async def unknown_model(folder: Path) -> Run:
        return await doctor(folder, **{**model_env, "NERVE_MODEL": "gpt-unheard-of"})

    async def database_under_a_file(folder: Path) -> Run:
        (folder / "plain-file").write_text("not a folder")
        # With a server to check too: starting servers opens the same store, and fails the same way.
        servers = {"q": {"command": "python", "args": ["-m", "servers.env_query"], "cwd": str(ROOT)}}
        (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        database = str(folder / "plain-file" / "db" / "nerve.db")
        return await doctor(folder, NERVE_DB=database, NERVE_MCP_CONFIG=str(folder / "mcp.json"))

    async def bad_setting(folder: Path) -> Run:
        (folder / ".env").write_text("NERVE_TOOL_TIMEOUT=-1\n")
        return await doctor(folder)

    async def slack_refused(folder: Path) -> Run:
        return await doctor(folder, **slack_env(fakes.slack_refusing))

    async def slack_scope_missing(folder: Path) -> Run:
        return await doctor(folder, **slack_env(fakes.slack_narrow))

    async def slack_no_way_in(folder: Path) -> Run:
        return await doctor(folder, SLACK_BOT_TOKEN=SLACK_BOT, SLACK_API_BASE_URL=fakes.slack.api_url)

    async def discord_refused(folder: Path) -> Run:
        return await doctor(folder, **discord_env(fakes.discord, DISCORD_WRONG))

    async def discord_no_intent(folder: Path) -> Run:
        return await doctor(folder, **discord_env(fakes.discord_no_intent))

    async def postgres_current(folder: Path) -> Run:
        return await doctor(folder, NERVE_DATABASE_URL=with_password(fakes.postgres.location))

    async def postgres_unreachable(folder: Path) -> Run:
        return await doctor(folder, NERVE_DATABASE_URL=f"postgresql://nerve:{URL_PASSWORD}@127.0.0.1:1/nerve")

    async def postgres_no_database(folder: Path) -> Run:
        server = with_password(fakes.postgres.server_url).rsplit("/", 1)[0]
        return await doctor(folder, NERVE_DATABASE_URL=f"{server}/nerve_doctor_no_such_database")

    async def all_good_json(folder: Path) -> Run:
        return await all_good(folder, "--json")

    return {
        "all_good": all_good,
        "all_good_json": all_good_json,
        "bad_json": bad_json,
        "missing_command": missing_command,
        "failing_server": failing_server,
        "offline_model_for_slack": offline_model_for_slack,
        "repeated_server": repeated_server,
        "lookalike_servers": lookalike_servers,
        "unreachable_model": unreachable_model,
        "rejected_key": rejected_key,
        "unknown_model": unknown_model,
        "database_under_a_file": database_under_a_file,
        "bad_setting": bad_setting,
        "slack_refused": slack_refused,
        "slack_scope_missing": slack_scope_missing,
        "slack_no_way_in": slack_no_way_in,
        "discord_refused": discord_refused,
        "discord_no_intent": discord_no_intent,
        "postgres_current": postgres_current,
        "postgres_unreachable": postgres_unreachable,
        "postgres_no_database": postgres_no_database,
    }


def with_password(url: str) -> str:
    """The URL with URL_PASSWORD in it (the test server trusts its user, so it is not checked)."""
    scheme, _, rest = url.partition("://")
    user, _, host = rest.partition("@")
    return f"{scheme}://{user}:{URL_PASSWORD}@{host}"


@pytest.fixture(scope="module")
async def runs(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[dict[str, Run], Fakes]]:
    async with AsyncExitStack() as stack:
        model = await stack.enter_async_context(FakeLLMServer())
        model.api_key = MODEL_KEY
        model.models = ["text-embedding-3-small", "test-model"]
        slack = await stack.enter_async_context(FakeSlack())
        refusing = await stack.enter_async_context(FakeSlack())
        narrow = await stack.enter_async_context(FakeSlack())
        slack.scopes = refusing.scopes = list(NEEDED_SCOPES)
        refusing.fail_next["auth.test"] = "invalid_auth"
        narrow.scopes = [scope for scope in NEEDED_SCOPES if scope != "files:write"]
        discord = await stack.enter_async_context(FakeDiscord(token=DISCORD_TOKEN))
        discord.app_flags = INTENT
        no_intent = await stack.enter_async_context(FakeDiscord(token=DISCORD_TOKEN))
        postgres = await stack.enter_async_context(postgres_backend())
        await (await postgres.open()).close()  # migrated as a running nerve leaves it
        fakes = Fakes(model, slack, refusing, narrow, discord, no_intent, postgres)
        todo = setups(fakes)
        # A few at a time: each run starts its own MCP servers, and a 2-core machine runs other
        # test files meanwhile.
        at_once = asyncio.Semaphore(4)

        async def bounded(name: str, run: Setup) -> Run:
            async with at_once:
                return await run(tmp_path_factory.mktemp(name))

        results = await asyncio.gather(*(bounded(name, run) for name, run in todo.items()))
        yield dict(zip(todo, results, strict=True)), fakes


@pytest.fixture(scope="module")
def report(runs: tuple[dict[str, Run], Fakes]) -> dict[str, Run]:
    return runs[0]


def test_no_report_shows_any_piece_of_a_token_or_key(report):
    for name, run in report.items():
        shown = run.out + run.err
        for secret in SECRETS:
            secret = secret.partition("-")[2] or secret  # not `sk-`, `xoxb-`: every key has those
            pieces = {secret[i : i + 4] for i in range(len(secret) - 3)}
            leaked = sorted(piece for piece in pieces if piece in shown)
            assert not leaked, f"{name} shows {leaked} of a secret:\n{shown}"


def test_a_deployment_where_everything_works_is_all_ok_and_exits_0(runs):
    report, fakes = runs
    run = report["all_good"]
    assert run.code == 0, run.out + run.err
    width = len("server geo-simulator")
    assert run.lines == [
        row("ok", "settings", "read from the environment (no .env here)", width=width),
        row("ok", "servers file", f"{ROOT / 'mcp.json'}: 2 servers (env-query, geo-simulator)", width=width),
        row("ok", "server env-query", "ready, 1 tool", width=width),
        row("ok", "server geo-simulator", "ready, 1 tool", width=width),
        row("ok", "model", f"{fakes.model.base_url}: model 'test-model' is available", width=width),
        row(
            "ok",
            "database",
            f"{run.folder / 'nerve.db'}: created now, schema version {SCHEMA} (current), writable",
            width=width,
        ),
        row("ok", "slack", "SLACK_BOT_TOKEN works: nerve in the workspace Nerve Test", width=width),
        row("ok", "slack scopes", f"all {len(NEEDED_SCOPES)} scopes nerve uses are granted", width=width),
        row("ok", "slack events", "Socket Mode: SLACK_APP_TOKEN works", width=width),
        row("ok", "slack experience", AGENT_EXPERIENCE, width=width),
        row("ok", "discord", "DISCORD_BOT_TOKEN works: logged in as nerve (nerve)", width=width),
        row(
            "ok",
            "discord intents",
            "the application may read message content (NERVE_DISCORD_MESSAGE_CONTENT)",
            width=width,
        ),
    ]
    assert run.err == ""


def test_json_is_one_object_per_check_in_order_for_scripts(report):
    run = report["all_good_json"]
    assert run.code == 0, run.err
    checks = json.loads(run.out)
    assert [c["name"] for c in checks] == [
        "settings",
        "servers file",
        "server env-query",
        "server geo-simulator",
        "model",
        "database",
        "slack",
        "slack scopes",
        "slack events",
        "slack experience",
        "discord",
        "discord intents",
    ]
    assert all(set(c) == {"status", "name", "found", "todo"} for c in checks)
    assert {(c["status"], c["todo"]) for c in checks} == {("ok", None)}
    assert checks[2]["found"] == "ready, 1 tool"


def test_a_servers_file_that_is_not_json_is_an_error_with_its_line_and_column(report):
    run = report["bad_json"]
    path = run.folder / "mcp.json"
    found = f"{path}: not valid JSON at line 1 column 51: Expecting property name enclosed in double quotes"
    assert row("error", "servers file", found, "fix the servers file (or set NERVE_MCP_CONFIG)") in run.lines
    assert run.code == 1


def test_a_servers_file_naming_a_server_twice_is_an_error_naming_it(report):
    run = report["repeated_server"]
    found = f"{run.folder / 'mcp.json'}: server 'check' appears twice"
    assert row("error", "servers file", found, "fix the servers file (or set NERVE_MCP_CONFIG)") in run.lines
    assert run.code == 1


def test_server_names_only_case_or_punctuation_apart_are_a_warning_line_each(report):
    run = report["lookalike_servers"]
    path = run.folder / "mcp.json"
    for names in ("'Check' and 'check'", "'my-server' and 'my_server'"):
        found = f"{path}: servers {names} differ only in case or punctuation"
        assert row("warning", "servers file", found, "rename one of them") in run.lines, run.out
    assert run.code == 0, run.out + run.err


def test_a_server_whose_command_does_not_exist_is_an_error_while_the_others_start(report):
    run = report["missing_command"]
    assert run.code == 1
    found = "could not be started: No such file or directory: nerve-no-such-command"
    todo = "check its command in the servers file: is the program installed, and on PATH?"
    width = len("server env-query")
    assert row("error", "server gone", found, todo, width=width) in run.lines
    assert row("ok", "server env-query", "ready, 1 tool", width=width) in run.lines


def test_a_server_that_fails_at_start_shows_its_last_stderr_line(report):
    run = report["failing_server"]
    assert run.code == 1
    [line] = [line for line in run.lines if "server notes" in line]
    assert line.startswith("error"), line
    assert "its last stderr line: cannot open /srv/notes: no folder →" in line, line
    assert "see the log" not in line, line
    assert run.err == ""  # without -v the server's stderr stays out of the terminal, as before


def test_slack_with_the_offline_model_is_a_warning_that_its_people_get_rule_based_answers(report):
    run = report["offline_model_for_slack"]
    [line] = [line for line in run.lines if line.split()[1:2] == ["model"]]
    assert line.startswith("warning"), line
    assert "Slack users would get its rule-based answers" in line, line
    assert "→ for a real model set OPENAI_API_KEY" in line, line
    assert run.code == 0, run.out


def test_the_offline_model_in_the_terminal_alone_is_ok(report):
    run = report["bad_setting"]
    [line] = [line for line in run.lines if line.split()[1:2] == ["model"]]
    assert line.startswith("ok") and "the built-in offline model" in line, line


def test_a_model_service_nobody_answers_at_is_an_error(report):
    run = report["unreachable_model"]
    assert run.code == 1
    [line] = [line for line in run.lines if line.startswith("error    model")]
    assert re.fullmatch(
        r"error    model            could not reach the model service at "
        r"http://127\.0\.0\.1:\d+/v1 \(.+\)"
        r" → check OPENAI_BASE_URL and that the model service is running",
        line,
    ), line


def test_a_rejected_key_is_an_error_that_never_repeats_the_services_words(runs):
    report, fakes = runs
    run = report["rejected_key"]
    found = f"the model service at {fakes.model.base_url} rejected the API key (401)"
    assert row("error", "model", found, "check OPENAI_API_KEY") in run.lines
    assert run.code == 1
    assert "Incorrect API key" not in run.out  # OpenAI's own message quotes part of the key


def test_a_model_the_service_does_not_list_is_a_warning_only(runs):
    report, fakes = runs
    run = report["unknown_model"]
    found = (
        f"{fakes.model.base_url} does not list model 'gpt-unheard-of' (NERVE_MODEL); "
        "it lists 2: text-embedding-3-small, test-model"
    )
    assert row("warning", "model", found, "set NERVE_MODEL to one of the listed models") in run.lines
    assert run.code == 0


def test_a_database_in_a_folder_that_cannot_be_created_is_an_error(report):
    run = report["database_under_a_file"]
    path = run.folder / "plain-file" / "db" / "nerve.db"
    found = f"cannot create the folder for the conversation store {path}: Not a directory"
    todo = "set NERVE_DB to a file in a folder nerve can create and write"
    assert row("error", "database", found, todo) in run.lines
    assert row("error", "servers", found, "fix that, then run doctor again") in run.lines
    assert "Traceback" not in run.err
    assert run.code == 1


def test_a_postgresql_database_that_answers_is_ok_current_and_writable_and_keeps_nothing(runs):
    report, fakes = runs
    run = report["postgres_current"]
    where = describe(fakes.postgres.location)
    found = f"{where} (schema {fakes.postgres.schema}): schema version {SCHEMA} (current), writable"
    assert row("ok", "database", found) in run.lines, run.out + run.err
    assert run.code == 0
    # The write was rolled back: nothing of the probe is left in the schema.
    tables = {
        table
        for (table,) in asyncio.run(
            fakes.postgres.rows(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                (fakes.postgres.schema,),
            )
        )
    }
    assert "nerve_doctor_probe" not in tables and "schema_migrations" in tables


def test_a_postgresql_nobody_answers_at_is_an_error_naming_the_host_never_the_password(report):
    run = report["postgres_unreachable"]
    assert run.code == 1
    [line] = [line for line in run.lines if line.startswith("error    database")]
    assert line.startswith(
        row("error", "database", "cannot reach PostgreSQL at postgresql://nerve@127.0.0.1:1/nerve: ")
    ), line
    assert line.endswith(
        "→ start PostgreSQL at 127.0.0.1:1, or fix the host and port in NERVE_DATABASE_URL"
    ), line
    assert URL_PASSWORD not in run.out + run.err


def test_a_postgresql_database_that_does_not_exist_is_an_error_saying_to_create_it(report):
    run = report["postgres_no_database"]
    assert run.code == 1
    [line] = [line for line in run.lines if line.startswith("error    database")]
    assert "/nerve_doctor_no_such_database did not let nerve in: " in line, line
    assert line.endswith("→ create the database, or fix its name in NERVE_DATABASE_URL"), line


def test_a_bad_setting_in_dot_env_is_an_error_naming_it_and_the_other_checks_still_run(report):
    run = report["bad_setting"]
    found = "bad setting: NERVE_TOOL_TIMEOUT: Input should be greater than 0"
    todo = "fix NERVE_TOOL_TIMEOUT in the environment or .env (the checks below use the default)"
    assert run.lines[0] == row("error", "settings", found, todo)
    assert run.code == 1
    assert any(line.startswith("ok       database") for line in run.lines)


def test_a_slack_token_slack_refuses_is_an_error(report):
    run = report["slack_refused"]
    found = "Slack refused SLACK_BOT_TOKEN (invalid_auth)"
    todo = "copy the Bot User OAuth Token (xoxb-…) again from the Slack app (OAuth & Permissions)"
    assert row("error", "slack", found, todo) in run.lines
    assert run.code == 1


def test_a_slack_scope_a_feature_needs_is_a_warning_naming_it(report):
    run = report["slack_scope_missing"]
    todo = (
        "add them under OAuth & Permissions → Bot Token Scopes (slack/manifest.socket.yaml lists them all), "
        "then reinstall the app to the workspace"
    )
    assert (
        row("warning", "slack scopes", "missing files:write (uploading files tools return)", todo)
        in run.lines
    )
    assert row("ok", "slack events", "Socket Mode: SLACK_APP_TOKEN works") in run.lines
    assert run.code == 0


def test_slack_without_an_app_token_or_signing_secret_is_an_error(report):
    run = report["slack_no_way_in"]
    todo = "set SLACK_APP_TOKEN (xapp-…, for Socket Mode) or SLACK_SIGNING_SECRET (for Events API over HTTP)"
    assert row("error", "slack events", "nerve has no way to receive Slack events", todo) in run.lines
    assert run.code == 1


def test_a_discord_token_discord_rejects_is_an_error(report):
    run = report["discord_refused"]
    found = "Discord rejected DISCORD_BOT_TOKEN (401 Unauthorized)"
    todo = "copy the bot token again from the Developer Portal (Bot → Reset Token)"
    assert row("error", "discord", found, todo) in run.lines
    assert not any(
        line.startswith(("ok       discord intents", "warning  discord intents")) for line in run.lines
    )
    assert run.code == 1


def test_message_content_on_without_the_intent_is_a_warning(report):
    run = report["discord_no_intent"]
    found = (
        "NERVE_DISCORD_MESSAGE_CONTENT is on, but the application does not have the Message Content "
        "intent: Discord will refuse nerve's connection"
    )
    todo = (
        "enable it for the bot in the Developer Portal (Bot → Privileged Gateway Intents), "
        "or set NERVE_DISCORD_MESSAGE_CONTENT=false"
    )
    assert row("warning", "discord intents", found, todo) in run.lines
    assert run.code == 0


def test_a_secret_nerve_was_given_is_hidden_wherever_a_reason_quotes_it():
    redact = Redactor([SLACK_BOT, "1"])
    check = redact.check(
        Check("error", "server web", f"refused https://x.test/?token={SLACK_BOT}", "fix\nit")
    )
    assert check == Check("error", "server web", "refused https://x.test/?token=[hidden]", "fix it")
