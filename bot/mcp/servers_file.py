"""Reading the MCP servers file: JSON with repeated keys caught, `${VAR}`s filled, mistakes named, so
a wrong file fails at start naming the file, server and field (its shape: `bot.mcp.server_config`)."""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections import deque
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dotenv import dotenv_values
from pydantic import ValidationError

from bot.errors import ConfigError
from bot.mcp.server_config import SERVER_KEYS, McpConfig, PolicyContext, ServerConfig, ServersFile
from bot.plain_http import plain_http_host
from bot.types import Platforms

logger = logging.getLogger(__name__)


# `${VAR}` and VS Code's `${env:VAR}`; any other `${…}` is one nerve cannot fill.
_VAR = re.compile(r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}")
_OTHER_VAR = re.compile(r"\$\{[^}]*\}")


def _expand(value: str, environ: Mapping[str, str], where: str) -> str:
    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(f"{where} uses ${{{name}}}, but {name} is not set in the environment")
        return environ[name]

    expanded = _VAR.sub(sub, value)
    if (other := _OTHER_VAR.search(_VAR.sub("", value))) is not None:
        raise ConfigError(
            f"{where} uses {other.group(0)}, which nerve cannot fill: "
            "use ${NAME} (or ${env:NAME}) with NAME set in the environment"
        )
    return expanded


def _expand_server(name: str, server: ServerConfig, environ: Mapping[str, str], path: Path) -> ServerConfig:
    """The entry with its `${VAR}`s filled (secrets stay in the environment), paths made absolute."""
    where = f"{path}: server '{name}'"

    def fill(value: str, field: str) -> str:
        return _expand(value, environ, f"{where} field '{field}'")

    command = server.command
    if command in ("python", "python3"):
        # "python" means the interpreter nerve runs under, so a server sees nerve's packages.
        command = sys.executable
    if (cwd := server.cwd) is not None:
        cwd_path = Path(fill(cwd, "cwd"))
        cwd = str(cwd_path if cwd_path.is_absolute() else (path.parent / cwd_path).resolve())
    elif server.command:
        cwd = str(path.parent.resolve())
    env: dict[str, str] = {}
    if server.env_file is not None:  # relative to the servers file
        env_path = path.parent / fill(server.env_file, "envFile")
        if not env_path.is_file():
            raise ConfigError(f"{where} field 'envFile': {env_path} not found")
        env = {key: value for key, value in dotenv_values(env_path).items() if value is not None}
    env.update({k: fill(v, f"env.{k}") for k, v in server.env.items()})
    url = fill(server.url, "url") if server.url else None
    if url is not None and not server.allow_insecure_http and (insecure := plain_http_host(url)):
        raise ConfigError(
            f"{where} field 'url': plain http to {insecure} can be read and changed by anything on the "
            'path: use https (plain http is for loopback only), or set "allowInsecureHttp": true if '
            "you mean it (nerve still never sends credentials over it)"
        )
    if (auth := server.auth) is not None:
        secrets = {key: getattr(auth, key) for key in ("client_id", "client_secret")}
        auth = auth.model_copy(update={k: fill(v, f"auth.{k}") if v else None for k, v in secrets.items()})
    return server.model_copy(
        update={
            "command": fill(command, "command") if command else None,
            "args": [fill(a, "args") for a in server.args],
            "env": env,
            "cwd": cwd,
            "url": url,
            "headers": {k: fill(v, f"headers.{k}") for k, v in server.headers.items()},
            "auth": auth,
        }
    )


def _describe_validation_error(path: Path, error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        loc = [str(part) for part in item["loc"]]
        message = item["msg"].removeprefix("Value error, ")
        if len(loc) >= 3 and loc[0] == "policy":
            problems.append(f"policy '{loc[1]}' field '{'.'.join(loc[2:])}': {message}")
        elif len(loc) >= 2 and loc[0] in SERVER_KEYS:
            field = ".".join(loc[2:]) or "(entry)"
            if field == "(entry)" and item["msg"].startswith("Value error, '"):
                # A cross-field rule: name the field it is about ('type', 'transport', …).
                field = item["msg"].split("'")[1]
            problems.append(f"server '{loc[1]}' field '{field}': {message}")
        else:
            problems.append(f"field '{'.'.join(loc) or '(top level)'}': {message}")
    return f"{path}: " + "; ".join(problems)


def load_mcp_config(
    path: Path, environ: Mapping[str, str] | None = None, *, platforms: Platforms
) -> McpConfig:
    """`read_mcp_config`, with what reads wrong in the file logged."""
    config = read_mcp_config(path, environ, platforms=platforms)
    for warning in config.warnings:
        logger.warning("%s", warning)
    return config


def read_mcp_config(
    path: Path, environ: Mapping[str, str] | None = None, *, platforms: Platforms
) -> McpConfig:
    """The servers file read and checked; a server switched off does not need its secrets set."""
    env = os.environ if environ is None else environ
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=_Object.of)
    except FileNotFoundError:
        raise ConfigError(f"{path}: servers file not found (set NERVE_MCP_CONFIG to another file)") from None
    except IsADirectoryError:
        raise ConfigError(
            f"{path}: is a directory, not a file (set NERVE_MCP_CONFIG to the servers file)"
        ) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    if (repeated := _repeated_key(raw)) is not None:
        raise ConfigError(f"{path}: {repeated}")
    try:
        parsed = ServersFile.model_validate(raw, context=PolicyContext(platforms=platforms))
    except ValidationError as exc:
        raise ConfigError(_describe_validation_error(path, exc)) from None
    servers = {
        name: _expand_server(name, server, env, path)
        for name, server in parsed.entries.items()
        if server.active and name not in parsed.disabled
    }
    warnings = tuple(f"{path}: {problem}" for problem in lookalike_names(parsed.entries))
    models = tuple(parsed.models) if parsed.models is not None else None
    return McpConfig(servers=servers, scopes=parsed.scopes, warnings=warnings, models=models)


class _Object(dict[str, Any]):
    """A JSON object as read, with the keys it gave more than once (`json` keeps the last value)."""

    repeated: tuple[str, ...] = ()

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> _Object:
        found = cls(pairs)
        keys = [key for key, _ in pairs]
        found.repeated = tuple(dict.fromkeys(key for i, key in enumerate(keys) if key in keys[:i]))
        return found


def _repeated_key(raw: Any) -> str | None:
    """A key given twice in one object, and where: most JSON readers silently keep the last value."""
    waiting: deque[tuple[str, Any]] = deque([("", raw)])
    while waiting:
        where, value = waiting.popleft()
        if isinstance(value, _Object):
            if value.repeated:
                key = value.repeated[0]
                if where in SERVER_KEYS:
                    return f"server '{key}' appears twice"
                return f"key '{key}' appears twice " + (f"in {where}" if where else "at the top level")
            waiting.extend((f"{where}.{key}" if where else key, child) for key, child in value.items())
        elif isinstance(value, list):
            waiting.extend((f"{where}[{i}]", child) for i, child in enumerate(value))
    return None


def lookalike_names(names: Iterable[str]) -> list[str]:
    """A line for each group of server names only case or punctuation apart (easily mistaken)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault("".join(ch for ch in name.casefold() if ch.isalnum()), []).append(name)
    return [
        f"servers {' and '.join(repr(name) for name in group)} differ only in case or punctuation"
        for group in groups.values()
        if len(group) > 1
    ]
