"""The MCP servers file's shape: each server's entry, its sign-in, per-tool overrides and the policy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from bot.policy.approval import DEFAULT_MODE, ApprovalMode
from bot.policy.scopes import Rule, Scopes, pattern_problem, rule_name_problem
from bot.types import Platforms


class ToolOverride(BaseModel):
    """Per-tool settings layered over what the server says (S3, S12)."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    enabled: bool = True
    timeout: float | None = Field(default=None, gt=0)
    triggers: list[str] = Field(default_factory=list)
    # Replaces the server's approval mode for this one tool.
    approval: ApprovalMode | None = None


class AuthConfig(BaseModel):
    """How nerve signs in to a remote server: `oauth` per person (`identity: "user"`) or as one
    account (`"bot"`), or `client_credentials`; the client fields are for a pre-registered nerve."""

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
    """One server entry (a stdio command or a URL), in Claude Desktop's, Cursor's or VS Code's fields;
    `disabled` (Cline, Roo Code) and `enabled: false` both leave the server out."""

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
            # VS Code and Cursor spell the transport as `type`; "http" there is Streamable HTTP.
            wanted = "streamable-http" if self.type == "http" else self.type
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
        return "stdio" if self.command else self.transport or "streamable-http"

    @property
    def active(self) -> bool:
        return self.enabled and not self.disabled


SERVER_KEYS = ("mcpServers", "servers")
# The built-in tools' server names (`bot.memory.tools`, `bot.schedules.tools`, `bot.files.tools`), with
# what they are and another name to suggest: a policy may allow or deny them like any other, a file may
# not take them.
BUILT_IN = {
    "memory": ("its built-in memory tools", "knowledge-graph"),
    "schedules": ("its built-in schedule tools", "calendar"),
    "attachments": ("its built-in tools that read shared files", "file-store"),
}
_WILDCARDS = frozenset("*?[")


class PlaceRule(BaseModel):
    """One place's entry in `policy`: `server` or `server/tool` patterns; deny wins over allow."""

    model_config = ConfigDict(extra="forbid")

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    # "admins": only NERVE_ADMINS save memories for everyone in the place; "members" (default): anyone.
    placeMemory: Literal["members", "admins"] = "members"
    # The model the place's turns ask first: a name in the `models` list (NERVE_MODELS or this file's).
    model: str | None = Field(default=None, min_length=1)

    @field_validator("allow", "deny")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        if problem := next(filter(None, map(pattern_problem, patterns)), None):
            raise ValueError(problem)
        return patterns


class PolicyContext(TypedDict):
    """Pydantic's validation context: the platforms the policy's places are written for."""

    platforms: Platforms


class ServersFile(BaseModel):
    """The whole file: `mcpServers` or `servers`, `disabled`, and `policy`; other keys are ignored."""

    model_config = ConfigDict(extra="allow")

    mcpServers: dict[str, ServerConfig] | None = None
    servers: dict[str, ServerConfig] | None = None
    disabled: list[str] = Field(default_factory=list)
    policy: dict[str, PlaceRule] = Field(default_factory=dict)
    # The primary model and its fallbacks, as NERVE_MODELS lists them (read by `bot.model.models`).
    models: list[Any] | None = None

    @field_validator("policy")
    @classmethod
    def _places(cls, policy: dict[str, PlaceRule], info: ValidationInfo) -> dict[str, PlaceRule]:
        context: PolicyContext | None = info.context
        platforms = context["platforms"] if context is not None else Platforms()
        if problem := next(filter(None, (rule_name_problem(name, platforms) for name in policy)), None):
            raise ValueError(problem)
        entries = info.data.get("mcpServers") or info.data.get("servers")
        if entries is None:
            return policy  # the servers map has its own error
        for name, rule in policy.items():
            for key, patterns in (("allow", rule.allow), ("deny", rule.deny)):
                for pattern in patterns:
                    server = pattern.partition("/")[0]
                    # A misspelt server in a deny list would quietly deny nothing.
                    if not _WILDCARDS & set(server) and server not in entries and server not in BUILT_IN:
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
        for name, (what, instead) in BUILT_IN.items():
            if name in self.entries:
                raise ValueError(
                    f"server name '{name}' is nerve's own ({what}); give this server"
                    f" another name, such as '{instead}'"
                )
        if unknown := [name for name in self.disabled if name not in self.entries]:
            names = ", ".join(f"'{name}'" for name in unknown)
            raise ValueError(f"'disabled' names {names}, which the file does not configure")
        return self

    @property
    def entries(self) -> dict[str, ServerConfig]:
        return self.mcpServers if self.mcpServers is not None else (self.servers or {})

    @property
    def scopes(self) -> Scopes:
        rules = {
            name: Rule(
                allow=tuple(rule.allow),
                deny=tuple(rule.deny),
                members_remember=rule.placeMemory == "members",
                model=rule.model,
            )
            for name, rule in self.policy.items()
        }
        return Scopes(rules=rules)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpConfig:
    """What the servers file says: the active servers, and which places may use which of them."""

    servers: dict[str, ServerConfig]
    scopes: Scopes = field(default_factory=Scopes)
    # What the file says that works but reads wrong (server names only case or punctuation apart),
    # one line each, naming the file: logged at load time, shown by `nerve doctor`.
    warnings: tuple[str, ...] = ()
    # The file's `models` list as written, when it has one.
    models: tuple[Any, ...] | None = None
