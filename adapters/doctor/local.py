"""Checks of settings, the servers file, the MCP servers and the database, through the code nerve
starts with, so what passes here is what nerve will see. A server that will not start usually says why
on stderr, so the report quotes its last stderr line.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aiosqlite
from pydantic import ValidationError

from adapters.doctor.report import Check, error, ok, schema_news, warning
from adapters.settings import Settings, bad_setting
from bot.config import OFFLINE_MODEL
from bot.errors import ConfigError, StoreError
from bot.mcp.server_config import McpConfig, ServerConfig
from bot.mcp.servers_file import load_mcp_config
from bot.plain_http import plain_http_host
from bot.store.choose import POSTGRES_SCHEMES
from bot.store.connect import connect, rollback, store_error
from bot.store.sqlite import BUSY_TIMEOUT_MS, SQLiteStore

MODEL = "model"
REAL_MODEL = "set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible server), and NERVE_MODEL"
# How long each MCP server may take to start and list its tools: as long as nerve itself allows.
SERVER_LIMIT = 15.0
# How the host points at a server's stderr in the log (`MCPHost.problems`); the report quotes it.
SEE_LOG = "; see the log for its stderr"
STDERR_LOGGER = "bot.mcp.stderr"
# The repeat of a failed start's quiet lines (`bot.mcp.stderr`): its lines were each seen already.
REPEAT = "last output before it stopped:"


def slack_set_up(settings: Settings) -> bool:
    tokens = (settings.slack_bot_token, settings.slack_app_token, settings.slack_signing_secret)
    return any((*tokens, settings.slack_client_id))


def platforms_set_up(settings: Settings) -> str:
    """'Slack', 'Discord', 'Slack and Discord', or '' when neither is."""
    found = [("Slack", slack_set_up(settings)), ("Discord", settings.discord_bot_token is not None)]
    return " and ".join(name for name, on in found if on)


def offline_check(settings: Settings) -> Check:
    """A warning once Slack or Discord is set up: people there would get rule-based answers unawares."""
    why = "neither OPENAI_API_KEY nor OPENAI_BASE_URL is set"
    if settings.nerve_model == OFFLINE_MODEL:
        why = f"NERVE_MODEL is '{OFFLINE_MODEL}'"
    offline = f"the built-in offline model ({why})"
    if platforms := platforms_set_up(settings):
        found = f"{offline}: {platforms} users would get its rule-based answers, not a language model's"
        return warning(MODEL, found, f"for a real model {REAL_MODEL}")
    return ok(MODEL, f"{offline}: rule-based, not a language model; for a real one {REAL_MODEL}")


def load_settings() -> tuple[Check, Settings | None]:
    """Settings as nerve reads them. A bad value is an error naming the setting; the checks after
    it go on with that setting's default, so one run shows every problem."""
    source = "the environment and .env" if Path(".env").is_file() else "the environment (no .env here)"
    try:
        return ok("settings", f"read from {source}"), Settings()
    except ValidationError as exc:
        found = bad_setting(exc)
        bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
    todo = f"fix {', '.join(sorted(name.upper() for name in bad))} in the environment or .env"
    fields = Settings.model_fields
    try:
        settings = Settings(**{name: fields[name].default for name in bad if name in fields})
    except ValidationError:
        return error("settings", found, todo), None
    return error("settings", found, f"{todo} (the checks below use the default)"), settings


def load_servers(settings: Settings) -> tuple[Check, McpConfig | None]:
    """The servers file, read and checked exactly as at start."""
    path = settings.nerve_mcp_config
    try:
        mcp = load_mcp_config(path, platforms=settings.platforms)
    except ConfigError as exc:
        todo = "fix the servers file (or set NERVE_MCP_CONFIG)"
        if not path.is_file():
            todo = "create it (see 'Add an MCP server' in the README), or set NERVE_MCP_CONFIG to yours"
        return error("servers file", exc.message, todo), None
    if not mcp.servers:
        found = f"{path}: no servers switched on, so the model gets no tools"
        return warning("servers file", found, "add a server (see 'Add an MCP server' in the README)"), mcp
    count = len(mcp.servers)
    names = ", ".join(mcp.servers)
    return ok("servers file", f"{path}: {count} server{'s' if count != 1 else ''} ({names})"), mcp


async def check_servers(servers: dict[str, ServerConfig], settings: Settings) -> list[Check]:
    """Start every server as nerve does, wait (bounded) for each one's first attempt, stop them."""
    if not servers:
        return []
    # Imported here: the MCP client adds most of a second to a run that has no server to start.
    from bot.mcp.auth.loopback import CALLBACK
    from bot.mcp.host import STILL_STARTING, MCPHost
    from bot.mcp.personal import NEEDS_SIGN_IN
    from bot.runtime import open_store, shared_auth, sign_ins_for

    checks: list[Check] = []
    redirect: str | None = None
    if not settings.nerve_public_url and (signed := _signed_in(servers)):
        checks.append(_no_public_url(settings, signed))
        # The terminal's kind of address: nothing here completes a sign-in, it only lets the
        # servers be checked.
        redirect = f"http://127.0.0.1{CALLBACK}"
    async with open_store(settings) as store:
        try:
            sign_ins = sign_ins_for(settings, servers, store, redirect)
        except ConfigError as exc:
            todo = "set it in the environment or .env, then run doctor again"
            return [*checks, error("sign-in", exc.message, todo)]
        host = MCPHost(
            servers,
            default_timeout=settings.nerve_tool_timeout,
            connect_timeout=SERVER_LIMIT,
            max_call_seconds=settings.nerve_tool_max_seconds,
            sign_ins=sign_ins,
            auth=shared_auth(sign_ins),
        )
        try:
            with last_stderr_lines() as stderr:
                # A second past the servers' own limit, so each one reports its own timeout.
                await host.start(grace=SERVER_LIMIT + 1, limit=SERVER_LIMIT + 1)
                problems = {
                    name: _with_stderr(problem, stderr.get(name)) for name, problem in host.problems()
                }
            tools = Counter(spec.server for spec in host.list_tools())
            connected = {
                name: len(await sign_ins.people_connected(name))
                for name in servers
                if sign_ins is not None and sign_ins.per_person(name)
            }
        finally:
            await host.aclose()
    for name, config in servers.items():
        checks.extend(_plain_http(name, config))
        problem = problems.get(name)
        if name in connected and problem in (None, NEEDS_SIGN_IN):
            who = "1 person has" if connected[name] == 1 else f"{connected[name]} people have"
            checks.append(ok(f"server {name}", f"each person signs in; {who} connected"))
        else:
            if problem == STILL_STARTING:
                problem = f"did not finish starting within {SERVER_LIMIT:g} s"
            checks.append(_server_check(name, config, problem, tools[name]))
    return checks


def _signed_in(servers: dict[str, ServerConfig]) -> list[str]:
    """Servers people (or an admin) sign in to with OAuth: the ones that need NERVE_PUBLIC_URL."""
    return sorted(name for name, config in servers.items() if config.auth and config.auth.type == "oauth")


def _no_public_url(settings: Settings, signed: list[str]) -> Check:
    """NERVE_PUBLIC_URL missing: an error where Slack or Discord is set up (the terminal needs none)."""
    todo = (
        "set NERVE_PUBLIC_URL to the address people's browsers reach this nerve at"
        " (sign-in lands on NERVE_PUBLIC_URL/oauth/callback)"
    )
    unset = f"{', '.join(signed)} use OAuth sign-in and NERVE_PUBLIC_URL is not set"
    if platforms := platforms_set_up(settings):
        return error("sign-in", f"{unset}: {platforms} cannot start without it", todo)
    found = (
        f"{unset}: fine for the terminal, which signs in through its own loopback address;"
        " nerve slack and nerve discord would need it"
    )
    return warning("sign-in", found, f"before running nerve slack or nerve discord, {todo}")


def _with_stderr(problem: str, last_line: str | None) -> str:
    """The problem with the server's last stderr line in place of the log's pointer to it."""
    if last_line is None:
        return problem
    return f"{problem.removesuffix(SEE_LOG)}; its last stderr line: {last_line}"


def _plain_http(name: str, config: ServerConfig) -> list[Check]:
    """A warning for a server reached over plain http off this machine (`allowInsecureHttp`)."""
    host = plain_http_host(config.url) if config.url and config.allow_insecure_http else None
    if host is None:
        return []
    found = (
        f"plain http to {host} (allowInsecureHttp): anything on the path can read and change its traffic;"
        " nerve sends it no headers or sign-in credentials"
    )
    return [warning(f"server {name}", found, "serve it over https and drop allowInsecureHttp")]


def _server_check(name: str, config: ServerConfig, problem: str | None, tools: int) -> Check:
    label = f"server {name}"
    if problem is None:
        return ok(label, f"ready, {tools} tool{'s' if tools != 1 else ''}")
    if "nerve connect" in problem:
        todo = f"run `nerve connect {name}` and sign in with the account nerve should use"
    elif "auth entry" in problem:
        todo = 'add "auth": {"type": "oauth", "identity": "user"} (or "bot") to its entry'
    elif config.kind != "stdio":
        todo = "check its url and headers in the servers file, and that the server is running"
    elif "could not be started" in problem:
        todo = "check its command in the servers file: is the program installed, and on PATH?"
    else:
        todo = "check its command, args, cwd and env in the servers file"
        if "stderr" in problem:
            todo += "; `nerve -v doctor` shows all it wrote to stderr"
    return error(label, problem, todo)


async def check_database(settings: Settings) -> list[Check]:
    """Open the store as nerve does, then try a write that is rolled back: an unwritable store fails later."""
    if settings.nerve_database_url is not None:
        return [await _check_postgres(settings.nerve_database_url.get_secret_value())]
    path = settings.nerve_db
    try:
        before = await _schema_version(path) if await asyncio.to_thread(path.exists) else None
        store = await SQLiteStore.open(path)
        await store.close()
        version = await _write_probe(path)
    except StoreError as exc:
        todo = "fix that, or point NERVE_DB at another file"
        if not await asyncio.to_thread(path.parent.is_dir):
            todo = "set NERVE_DB to a file in a folder nerve can create and write"
        return [error("database", exc.message, todo)]
    news = schema_news(before, version)
    return [ok("database", f"{path}: {news}schema version {version} (current), writable")]


async def _check_postgres(url: str) -> Check:
    """NERVE_DATABASE_URL's store, when the URL is one and the `postgres` extra is installed."""
    if not url.startswith(POSTGRES_SCHEMES):
        todo = "write it as postgresql://user:password@host:5432/database, or unset it to use NERVE_DB"
        return error("database", "NERVE_DATABASE_URL is not a PostgreSQL URL", todo)
    try:
        from adapters.doctor.postgres_check import check_postgres
    except ImportError as exc:
        found = f"NERVE_DATABASE_URL is set but PostgreSQL support is not installed ({exc.name} is missing)"
        return error("database", found, "pip install 'nerve[postgres]'")
    return await check_postgres(url)


async def _schema_version(path: Path) -> int:
    """The newest migration an existing file has, read without writing anything (0: none)."""
    try:
        uri = (await asyncio.to_thread(path.resolve)).as_uri()
        async with aiosqlite.connect(f"{uri}?mode=ro", uri=True) as db:
            rows = list(await db.execute_fetchall("SELECT max(version) FROM schema_migrations"))
    except sqlite3.Error:
        return 0  # a blank file, or one SQLiteStore.open will explain
    return int(rows[0][0] or 0) if rows else 0


async def _write_probe(path: Path) -> int:
    """The schema version, after a write inside a transaction that is rolled back."""
    db = await connect(path, BUSY_TIMEOUT_MS)
    try:
        rows = list(await db.execute_fetchall("SELECT max(version) FROM schema_migrations"))
        await db.execute("BEGIN IMMEDIATE")
        try:
            await db.execute("CREATE TABLE nerve_doctor_probe (written INTEGER)")
        finally:
            await rollback(db)
    except sqlite3.Error as exc:
        raise store_error(exc, path) from exc
    finally:
        await db.close()
    return int(rows[0][0] or 0) if rows else 0


class LastStderrLines(logging.Handler):
    """Keeps each server's newest stderr line, and passes on the records the log would have shown."""

    def __init__(self, shown_from: int) -> None:
        super().__init__(logging.INFO)
        self.last: dict[str, str] = {}
        self._shown_from = shown_from

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if not text.startswith(REPEAT) and text.strip():
            self.last[record.name.removeprefix(f"{STDERR_LOGGER}.")] = text.splitlines()[-1].strip()
        if record.levelno >= self._shown_from:
            logging.getLogger().handle(record)


@contextmanager
def last_stderr_lines() -> Iterator[dict[str, str]]:
    """`with last_stderr_lines() as last:` — `last[server]` is its newest stderr line, once written."""
    logger = logging.getLogger(STDERR_LOGGER)
    handler = LastStderrLines(logger.getEffectiveLevel())
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield handler.last
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
