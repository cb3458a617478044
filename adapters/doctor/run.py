"""`nerve doctor`: every check, a line each as it completes (or JSON at the end); exit code 1 on any
error. The checks that wait run at once, their lines still in a fixed order.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from dataclasses import asdict
from typing import Any
from urllib.parse import unquote, urlsplit

from adapters.doctor.local import (
    check_database,
    check_servers,
    load_servers,
    load_settings,
    offline_check,
    slack_set_up,
)
from adapters.doctor.report import Check, Redactor, error, line, ok, warning
from adapters.log_format import install, log_to_stderr, settings_secrets
from adapters.settings import Settings
from adapters.terminal.safe import terminal_json
from bot.errors import NerveError
from bot.mcp.server_config import McpConfig
from bot.model.models import check_place_models, configured_models, key_values

# The name column fits the longest name any report may have, and servers' `server NAME` up to MAX_WIDTH.
MIN_WIDTH = len("discord intents")
MAX_WIDTH = 28


def secrets_of(settings: Settings, mcp: McpConfig | None) -> list[str]:
    """Every value the report must never show: tokens, keys, and what servers get in env and headers."""
    found = settings_secrets(settings)
    if settings.nerve_database_url is not None:
        found.extend(url_passwords(settings.nerve_database_url.get_secret_value()))
    for server in mcp.servers.values() if mcp is not None else ():
        found += [*server.env.values(), *server.headers.values()]
    if mcp is not None and mcp.models is not None:
        found += key_values(mcp.models)
    return found


def url_passwords(url: str) -> list[str]:
    """The URL whole and its password as written and decoded: a driver's message may quote either."""
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    return [url, *((password, unquote(password)) if password else ())]


async def diagnose(*, as_json: bool, verbose: bool) -> list[Check]:
    """Run every check, writing each one's line in order as it completes (none for `as_json`)."""
    checks: list[Check] = []
    redact = Redactor()
    width = MIN_WIDTH

    def report(check: Check) -> None:
        check = redact.check(check)
        checks.append(check)
        if not as_json:
            sys.stdout.write(line(check, width) + "\n")
            sys.stdout.flush()

    settings_check, settings = load_settings()
    # Without -v only errors reach stderr: what a warning would say is in the report already.
    log_to_stderr(settings.nerve_log_level if verbose and settings is not None else "ERROR")
    # The chosen log format, and secrets hidden, as in every other command.
    install(settings.nerve_log_format if settings else "text", settings_secrets(settings) if settings else ())
    if settings is None:
        report(settings_check)
        return checks
    servers_check, mcp = load_servers(settings)
    servers = mcp.servers if mcp is not None else {}
    redact = Redactor(secrets_of(settings, mcp))
    width = min(MAX_WIDTH, max([width, *(len(f"server {name}") for name in servers)]))
    for check in (settings_check, servers_check):
        report(check)
    # Server names only case or punctuation apart: a person or a model can take one for the other.
    for found in mcp.warnings if mcp else ():
        report(warning("servers file", found, "rename one of them"))
    later: list[tuple[str, Coroutine[Any, Any, list[Check]]]] = [
        ("servers", check_servers(servers, settings)),
        ("model", _model(settings, mcp)),
        ("database", check_database(settings)),
        ("slack", _slack(settings)),
        ("discord", _discord(settings)),
    ]
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_as_lines(name, work)) for name, work in later]
        for task in tasks:
            for check in await task:
                report(check)
    return checks


async def _as_lines(name: str, work: Coroutine[Any, Any, list[Check]]) -> list[Check]:
    """A check that fails with one of nerve's own errors is a line of the report, not a traceback."""
    try:
        return await work
    except NerveError as exc:
        return [error(name, exc.message, "fix that, then run doctor again")]


# The model client and the platforms' libraries are imported only when they are configured: each
# adds about half a second to a run that does not need it.


async def _model(settings: Settings, mcp: McpConfig | None) -> list[Check]:
    models = configured_models(
        settings, mcp.models if mcp is not None else None, file_name=str(settings.nerve_mcp_config)
    )
    scopes = mcp.scopes if mcp is not None else None
    places = scopes.models if scopes is not None else {}
    check_place_models(models, places)
    if models is None:
        return [offline_check(settings)]
    from adapters.doctor.model import check_model

    if models.source == "OPENAI_*":
        checks = [await check_model(settings)]
    else:
        checks = list(
            await asyncio.gather(
                *(check_model(settings, spec, source=models.source) for spec in models.specs)
            )
        )
        order = " → ".join(models.names)
        checks.append(ok("models", f"{order} (each asked when the one before fails)"))
    # Which model each place the policy names one for is answered by.
    checks += [ok(f"model of {place}", f"'{name}'") for place, name in sorted(places.items())]
    return checks


async def _slack(settings: Settings) -> list[Check]:
    if not slack_set_up(settings):
        return []
    from adapters.doctor.slack_check import check_slack

    return await check_slack(settings)


async def _discord(settings: Settings) -> list[Check]:
    if settings.discord_bot_token is None:
        return []
    from adapters.doctor.discord_check import check_discord

    return await check_discord(settings)


def run_doctor(*, as_json_output: bool, verbose: bool = False) -> int:
    checks = asyncio.run(diagnose(as_json=as_json_output, verbose=verbose))
    if as_json_output:
        sys.stdout.write(terminal_json([asdict(check) for check in checks]) + "\n")
    return 1 if any(check.status == "error" for check in checks) else 0
