"""Settings (environment and `.env`) and the MCP servers file.

Loaded once by the command line (`adapters.cli`) and passed down; nothing here runs at import time.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.errors import ConfigError
from bot.plain_http import plain_http_host
from bot.policy.approval import DEFAULT_MODE, ApprovalMode
from bot.policy.scopes import Rule, Scopes, pattern_problem, rule_name_problem

logger = logging.getLogger(__name__)

OFFLINE_MODEL = "offline"
# The shortest NERVE_TURN_LEASE accepted, in seconds.
MIN_TURN_LEASE = 2.0


# Where every settings class reads from: the environment and `.env`. Empty values count as unset, so
# a copy of .env.example works as it is. The front ends' own settings read the same sources.
SETTINGS_SOURCES = SettingsConfigDict(
    env_file=".env", env_file_encoding="utf-8", extra="ignore", env_ignore_empty=True
)


class Settings(BaseSettings):
    """The core's settings; each front end adds its own (`adapters.settings`). `.env.example` lists
    each one with its default."""

    model_config = SETTINGS_SOURCES

    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    nerve_model: str = "gpt-4o-mini"
    nerve_db: Path = Path("./nerve.db")
    # postgresql://… keeps the conversation store on PostgreSQL (several processes may share it);
    # unset, it is the SQLite file NERVE_DB.
    nerve_database_url: SecretStr | None = None
    nerve_mcp_config: Path = Path("./mcp.json")
    nerve_max_rounds: int = Field(default=8, ge=1, le=50)
    nerve_context_tokens: int = Field(default=16000, ge=1000)
    nerve_llm_timeout: float = Field(default=60.0, gt=0)
    nerve_llm_max_retries: int = Field(default=4, ge=0, le=10)
    # Streamed answers: "auto" streams and serves providers that refuse it without; "on" always
    # streams (a refusal is an error); "off" never streams.
    nerve_llm_stream: Literal["auto", "on", "off"] = "auto"
    # Seconds a streamed answer may send nothing before it counts as broken off (at most
    # NERVE_LLM_TIMEOUT, which also bounds the wait for its first chunk).
    nerve_llm_stream_stall: float = Field(default=30.0, gt=0)
    nerve_tool_timeout: float = Field(default=30.0, gt=0)
    # A call's timeout is an idle timeout (progress restarts it); this bounds a call's time in all,
    # not counting time its server spends waiting for a person's answer.
    nerve_tool_max_seconds: float = Field(default=600.0, gt=0)
    nerve_system_prompt: str | None = None
    nerve_log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "debug", "info", "warning", "error"] = (
        "WARNING"
    )
    # The interactive chat writes its log here instead of between the turns (unless -v).
    nerve_log_file: Path = Path("./nerve.log")
    # "text": one readable line per record; "json": one JSON object per line, for log collectors.
    nerve_log_format: Literal["text", "json"] = "text"
    # Where traces go (OTLP over HTTP), when the `otel` extra is installed; read here so `.env` works.
    otel_exporter_otlp_endpoint: str | None = None
    # Turns running at once across all conversations, and how many more may wait for a slot.
    nerve_max_concurrent_turns: int = Field(default=16, ge=1, le=1000)
    nerve_turn_queue: int = Field(default=100, ge=0, le=100_000)
    # Longest question accepted, in characters; longer ones get a plain reply, not a model call.
    nerve_max_question_chars: int = Field(default=20_000, ge=100)
    # Seconds of model work one turn may take in all (every round, retry and tool call), not counting
    # time spent waiting for a person; then the turn ends with a plain sentence.
    nerve_turn_deadline: float = Field(default=180.0, gt=0)
    # Seconds a turn of a process that stopped keeps its conversation (SQLite only: PostgreSQL's
    # lock goes with the dead process's connection at once).
    nerve_turn_lease: float = 20.0

    # 0 picks a free port (tests); anything else must be a real TCP port.
    nerve_http_port: int = Field(default=3000, ge=0, le=65535)
    # 0.0.0.0 serves every interface (containers); 127.0.0.1 only this machine (behind a local proxy).
    nerve_http_host: str = "0.0.0.0"
    # A platform's deliveries are remembered this long for dedupe and replay, then pruned.
    nerve_inbox_retention_hours: float = Field(default=24.0, gt=0)
    # Days a conversation is kept after its last message; then the hourly prune deletes it (its
    # messages and everything holding their text). 0 keeps conversations forever. The approvals
    # audit (who decided which tool call, where and when; no message text) is kept either way.
    nerve_retention_days: float = Field(default=0.0, ge=0)
    # Seconds a platform's front end lets running turns finish after SIGTERM; turns still
    # running then are cut off and answered at the next start.
    nerve_shutdown_grace: float = Field(default=20.0, ge=0)
    # With NERVE_DATABASE_URL, received messages are jobs every nerve process on the database shares:
    # how many one process runs at once, and the seconds without a heartbeat after which a process
    # counts as dead and the jobs it was running are run again by another.
    nerve_worker_concurrency: int = Field(default=8, ge=1, le=1000)
    nerve_worker_stall_timeout: float = Field(default=30.0, ge=1)

    # Platform user ids who may decide any approval and manage remembered ones, comma-separated.
    nerve_admins: str = ""
    # Seconds an approval request waits for a decision; then the turn goes on without those calls.
    nerve_approval_timeout: float = Field(default=600.0, gt=0)
    # Seconds a tool's question (a form or a link) waits for its person; then the tool gets "cancel".
    nerve_input_timeout: float = Field(default=600.0, gt=0)
    # Where people's browsers reach this nerve (https://nerve.example.com): OAuth sign-in lands on
    # NERVE_PUBLIC_URL/oauth/callback and the client metadata document is served beside it.
    nerve_public_url: str | None = None
    # Encrypts stored sign-in tokens; required once any server uses OAuth. `nerve secret-key` makes one.
    nerve_secret_key: SecretStr | None = None
    # Seconds a turn waits for a person to finish signing in; then the call is reported as not made.
    nerve_sign_in_timeout: float = Field(default=900.0, gt=0)

    @field_validator("nerve_llm_stream", "nerve_log_format", mode="before")
    @classmethod
    def _lowercase_choice(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @field_validator("nerve_turn_lease")
    @classmethod
    def _renewable_lease(cls, value: float) -> float:
        # A live turn renews its lease every quarter lease; shorter than this, a busy event loop or
        # a slow disk would make a running turn lose its conversation to the next one.
        if value < MIN_TURN_LEASE:
            raise ValueError(
                f"NERVE_TURN_LEASE must be at least {MIN_TURN_LEASE:g} seconds (got {value:g}): a running"
                " turn renews it every quarter lease, and a shorter one would let another turn take"
                " over a conversation that is still being answered"
            )
        return value

    @property
    def admins(self) -> frozenset[str]:
        """The ids in NERVE_ADMINS, without blanks."""
        return frozenset(part.strip() for part in self.nerve_admins.split(",") if part.strip())

    @property
    def uses_offline_model(self) -> bool:
        """No key and no endpoint means no model service to talk to: use the embedded one."""
        if self.nerve_model == OFFLINE_MODEL:
            return True
        return self.openai_api_key is None and not self.openai_base_url


class ToolOverride(BaseModel):
    """Per-tool settings layered over what the server says (S3, S12)."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    enabled: bool = True
    timeout: float | None = Field(default=None, gt=0)
    triggers: list[str] = Field(default_factory=list)
    # Replaces the server's approval mode for this one tool.
    approval: ApprovalMode | None = None


# VS Code and Cursor spell the transport as `type`; "http" there is Streamable HTTP.
_TYPES: dict[str, Literal["stdio", "streamable-http", "sse"]] = {
    "stdio": "stdio",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "sse": "sse",
}


class AuthConfig(BaseModel):
    """Whose identity a remote server's calls carry, and how nerve signs in to it.

    `oauth` follows the MCP authorization specification: with `identity: "user"` each person signs
    in once and their calls use their own token; with `identity: "bot"` an admin connects one
    account for everyone (`nerve connect`). `client_credentials` is machine-to-machine. The client
    fields are for an authorization server that registered nerve beforehand; without them nerve
    uses its Client ID Metadata Document where the server supports one, else registers itself.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    type: Literal["oauth", "client_credentials"]
    identity: Literal["user", "bot"] = "user"
    client_id: str | None = None
    client_secret: str | None = None
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = None
    # Asked for when neither the server's challenge nor its metadata says which scopes to request.
    scope: str | None = None

    @model_validator(mode="after")
    def _coherent(self) -> AuthConfig:
        if self.client_secret and not self.client_id:
            raise ValueError("'auth.client_secret' needs an 'auth.client_id'")
        if self.type == "client_credentials":
            if not self.client_id or not self.client_secret:
                raise ValueError("'auth' of type 'client_credentials' needs 'client_id' and 'client_secret'")
            self.identity = "bot"
        return self

    @property
    def per_person(self) -> bool:
        return self.type == "oauth" and self.identity == "user"


class ServerConfig(BaseModel):
    """One server entry: a stdio command, or a URL for a remote server.

    Accepts the Claude Desktop / Cursor fields and VS Code's (`type`, `envFile`, `dev`); `disabled`
    (Cline, Roo Code) and `enabled: false` both leave the server out.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_file: str | None = Field(default=None, alias="envFile")
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    # How nerve signs in to a remote server that asks for OAuth (none: static headers or nothing).
    auth: AuthConfig | None = None
    # A remote URL on loopback, a private range or a link-local address (cloud metadata) is refused
    # unless this says the operator means it: a config typo or a redirect must not reach inside.
    allow_private_network: bool = Field(default=False, alias="allowPrivateNetwork")
    # A remote URL over plain http to a host that is not loopback is refused unless this says the
    # operator means it: anything on the path can read and change such traffic. Even then nerve never
    # sends a credential over it (the configured headers, OAuth secrets and tokens): see bot.plain_http.
    allow_insecure_http: bool = Field(default=False, alias="allowInsecureHttp")
    transport: Literal["stdio", "streamable-http", "sse"] | None = None
    type: Literal["stdio", "http", "streamable-http", "sse"] | None = None
    enabled: bool = True
    disabled: bool = False
    timeout: float | None = Field(default=None, gt=0)
    # When a call waits for a person: "never", "writes" (unless a trusted server marks the tool
    # read-only) or "always"; a tool's own setting wins.
    approval: ApprovalMode = DEFAULT_MODE
    # The operator trusts this server's tool annotations: its `readOnlyHint` lets a call run unasked
    # under "writes". Off, a server's claims about itself never lower the bar (a lying server would
    # get its tools run unasked), and every call of it under "writes" asks.
    trust_annotations: bool = Field(default=False, alias="trustAnnotations")
    tools: dict[str, ToolOverride] = Field(default_factory=dict)
    # VS Code's development mode (watch and debug); it means nothing to nerve.
    dev: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if self.type is not None:
            wanted = _TYPES[self.type]
            if self.transport is not None and self.transport != wanted:
                raise ValueError(f"'type' {self.type!r} and 'transport' {self.transport!r} disagree")
            if wanted == "stdio" and self.url:
                raise ValueError("'type' 'stdio' needs a 'command', not a 'url' (use 'http' or 'sse')")
            if wanted != "stdio" and self.command:
                raise ValueError(f"'type' {self.type!r} needs a 'url', not a 'command' (use 'stdio')")
            self.transport = wanted
        if self.command and self.url:
            raise ValueError("give either 'command' (stdio) or 'url' (remote), not both")
        if not self.command and not self.url:
            raise ValueError("needs 'command' (stdio) or 'url' (remote)")
        if self.command and self.transport not in (None, "stdio"):
            raise ValueError(f"transport '{self.transport}' needs a 'url', not a 'command'")
        if self.url and self.transport == "stdio":
            raise ValueError("transport 'stdio' needs a 'command', not a 'url'")
        if self.env_file is not None and not self.command:
            raise ValueError("'envFile' is for a stdio server (one with a 'command')")
        if self.auth is not None and not self.url:
            raise ValueError("'auth' is for a remote server (one with a 'url')")
        return self

    @property
    def kind(self) -> Literal["stdio", "streamable-http", "sse"]:
        if self.command:
            return "stdio"
        return self.transport or "streamable-http"

    @property
    def active(self) -> bool:
        return self.enabled and not self.disabled


SERVER_KEYS = ("mcpServers", "servers")
_WILDCARDS = frozenset("*?[")


class PlaceRule(BaseModel):
    """One place's entry in `policy`: `server` or `server/tool` patterns; deny wins over allow."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)

    @field_validator("allow", "deny")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            problem = pattern_problem(pattern)
            if problem is not None:
                raise ValueError(problem)
        return patterns


class ServersFile(BaseModel):
    """The whole file: `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code).

    Other top-level keys (VS Code's `inputs`) are ignored; `disabled` lists servers to leave out;
    `policy` maps places (`slack:C123`, `discord:dm`, `*`, …) to the servers and tools they may use.
    """

    model_config = ConfigDict(extra="allow")

    mcpServers: dict[str, ServerConfig] | None = None
    servers: dict[str, ServerConfig] | None = None
    disabled: list[str] = Field(default_factory=list)
    policy: dict[str, PlaceRule] = Field(default_factory=dict)

    @field_validator("policy")
    @classmethod
    def _places(cls, policy: dict[str, PlaceRule], info: ValidationInfo) -> dict[str, PlaceRule]:
        for name in policy:
            problem = rule_name_problem(name)
            if problem is not None:
                raise ValueError(problem)
        entries = info.data.get("mcpServers") or info.data.get("servers")
        if entries is None:
            return policy  # the servers map has its own error
        for name, rule in policy.items():
            for key, patterns in (("allow", rule.allow), ("deny", rule.deny)):
                for pattern in patterns:
                    server = pattern.partition("/")[0]
                    # A misspelt server in a deny list would quietly deny nothing.
                    if not _WILDCARDS & set(server) and server not in entries:
                        raise ValueError(
                            f"place '{name}' field '{key}': {pattern!r} names server '{server}', "
                            "which the file does not configure"
                        )
        return policy

    @model_validator(mode="after")
    def _one_map(self) -> ServersFile:
        if self.mcpServers is not None and self.servers is not None:
            raise ValueError("give either 'mcpServers' or 'servers', not both")
        if self.mcpServers is None and self.servers is None:
            raise ValueError("needs 'mcpServers' (Claude Desktop, Cursor) or 'servers' (VS Code)")
        unknown = [name for name in self.disabled if name not in self.entries]
        if unknown:
            names = ", ".join(f"'{name}'" for name in unknown)
            raise ValueError(f"'disabled' names {names}, which the file does not configure")
        return self

    @property
    def entries(self) -> dict[str, ServerConfig]:
        return self.mcpServers if self.mcpServers is not None else (self.servers or {})

    @property
    def scopes(self) -> Scopes:
        return Scopes(
            rules={
                name: Rule(allow=tuple(rule.allow), deny=tuple(rule.deny))
                for name, rule in self.policy.items()
            }
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class McpConfig:
    """What the servers file says: the active servers, and which places may use which of them."""

    servers: dict[str, ServerConfig]
    scopes: Scopes = field(default_factory=Scopes)
    # What the file says that works but reads wrong (server names only case or punctuation apart),
    # one line each, naming the file: logged at load time, shown by `nerve doctor`.
    warnings: tuple[str, ...] = ()


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
    other = _OTHER_VAR.search(_VAR.sub("", value))
    if other is not None:
        raise ConfigError(
            f"{where} uses {other.group(0)}, which nerve cannot fill: "
            "use ${NAME} (or ${env:NAME}) with NAME set in the environment"
        )
    return expanded


def _read_env_file(
    server: ServerConfig, environ: Mapping[str, str], path: Path, where: str
) -> dict[str, str]:
    """The variables of the server's `envFile` (relative to the servers file); `env` entries win."""
    if server.env_file is None:
        return {}
    field = f"{where} field 'envFile'"
    env_path = Path(_expand(server.env_file, environ, field))
    if not env_path.is_absolute():
        env_path = path.parent / env_path
    if not env_path.is_file():
        raise ConfigError(f"{field}: {env_path} not found")
    return {key: value for key, value in dotenv_values(env_path).items() if value is not None}


def _expand_server(name: str, server: ServerConfig, environ: Mapping[str, str], path: Path) -> ServerConfig:
    where = f"{path}: server '{name}'"
    command = server.command
    if command in ("python", "python3"):
        # "python" means the interpreter nerve runs under, so a server sees nerve's packages.
        command = sys.executable
    cwd = server.cwd
    if cwd is not None:
        cwd_path = Path(_expand(cwd, environ, f"{where} field 'cwd'"))
        cwd = str(cwd_path if cwd_path.is_absolute() else (path.parent / cwd_path).resolve())
    elif server.command:
        cwd = str(path.parent.resolve())
    env = _read_env_file(server, environ, path, where)
    env.update({k: _expand(v, environ, f"{where} field 'env.{k}'") for k, v in server.env.items()})
    url = _expand(server.url, environ, f"{where} field 'url'") if server.url else None
    insecure = plain_http_host(url) if url is not None and not server.allow_insecure_http else None
    if insecure is not None:
        raise ConfigError(
            f"{where} field 'url': plain http to {insecure} can be read and changed by anything on the "
            'path: use https (plain http is for loopback only), or set "allowInsecureHttp": true if '
            "you mean it (nerve still never sends credentials over it)"
        )
    return server.model_copy(
        update={
            "command": _expand(command, environ, f"{where} field 'command'") if command else None,
            "args": [_expand(a, environ, f"{where} field 'args'") for a in server.args],
            "env": env,
            "cwd": cwd,
            "url": url,
            "headers": {
                k: _expand(v, environ, f"{where} field 'headers.{k}'") for k, v in server.headers.items()
            },
            "auth": _expand_auth(server.auth, environ, where),
        }
    )


def _expand_auth(auth: AuthConfig | None, environ: Mapping[str, str], where: str) -> AuthConfig | None:
    """`${VAR}` in the client credentials, so a secret stays in the environment, not the file."""
    if auth is None:
        return None
    return auth.model_copy(
        update={
            "client_id": _expand(auth.client_id, environ, f"{where} field 'auth.client_id'")
            if auth.client_id
            else None,
            "client_secret": _expand(auth.client_secret, environ, f"{where} field 'auth.client_secret'")
            if auth.client_secret
            else None,
        }
    )


def _describe_validation_error(path: Path, error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        loc = [str(part) for part in item["loc"]]
        if len(loc) >= 3 and loc[0] == "policy":
            problems.append(f"policy '{loc[1]}' field '{'.'.join(loc[2:])}': {_plain(item['msg'])}")
        elif len(loc) >= 2 and loc[0] in SERVER_KEYS:
            field = ".".join(loc[2:]) or "(entry)"
            if field == "(entry)" and item["msg"].startswith("Value error, '"):
                # A cross-field rule: name the field it is about ('type', 'transport', …).
                field = item["msg"].split("'")[1]
            problems.append(f"server '{loc[1]}' field '{field}': {_plain(item['msg'])}")
        else:
            problems.append(f"field '{'.'.join(loc) or '(top level)'}': {_plain(item['msg'])}")
    return f"{path}: " + "; ".join(problems)


def _plain(message: str) -> str:
    return message.removeprefix("Value error, ")


def load_servers(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, ServerConfig]:
    """The active servers of the servers file (see `load_mcp_config`)."""
    return load_mcp_config(path, environ).servers


def load_mcp_config(path: Path, environ: Mapping[str, str] | None = None) -> McpConfig:
    """Read and check the servers file once; a mistake fails here, naming the file, server and field.
    What reads wrong in it is logged (`read_mcp_config` reads it without a word)."""
    config = read_mcp_config(path, environ)
    for warning in config.warnings:
        logger.warning("%s", warning)
    return config


def read_mcp_config(path: Path, environ: Mapping[str, str] | None = None) -> McpConfig:
    """The servers file read and checked, its warnings returned, not logged.

    Disabled servers are left out before their `${VAR}`s are filled, so a server switched off
    does not need its secrets set.
    """
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
    repeated = _repeated_key(raw)
    if repeated is not None:
        raise ConfigError(f"{path}: {repeated}")
    try:
        parsed = ServersFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe_validation_error(path, exc)) from None
    servers = {
        name: _expand_server(name, server, env, path)
        for name, server in parsed.entries.items()
        if server.active and name not in parsed.disabled
    }
    warnings = tuple(f"{path}: {problem}" for problem in lookalike_names(parsed.entries))
    return McpConfig(servers=servers, scopes=parsed.scopes, warnings=warnings)


class _Object(dict[str, Any]):
    """A JSON object as read, with the keys it gave more than once (`json` keeps the last value)."""

    repeated: tuple[str, ...] = ()

    @classmethod
    def of(cls, pairs: list[tuple[str, Any]]) -> _Object:
        found = cls()
        repeated: list[str] = []
        for key, value in pairs:
            if key in found and key not in repeated:
                repeated.append(key)
            found[key] = value
        found.repeated = tuple(repeated)
        return found


def _repeated_key(raw: Any) -> str | None:
    """A key given twice in one object of the file, and where; outermost first, else in file order.

    A repeated key is a mistake JSON readers disagree on (most keep the last value, silently): a
    second `"check"` server would quietly replace the first.
    """
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


def _folded(name: str) -> str:
    return "".join(ch for ch in name.casefold() if ch.isalnum())


def lookalike_names(names: Iterable[str]) -> list[str]:
    """A line for each group of server names only case or punctuation apart (`Check` and `check`,
    `my-server` and `my_server`): allowed, but a person or a model can take one for the other."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(_folded(name), []).append(name)
    return [
        f"servers {' and '.join(repr(name) for name in group)} differ only in case or punctuation"
        for group in groups.values()
        if len(group) > 1
    ]
