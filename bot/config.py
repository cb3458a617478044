"""The core's settings, read from the environment and `.env`.

Loaded once by the command line (`adapters.cli`) and passed down; nothing here runs at import time.
The MCP servers file is read by `bot.mcp.servers_file`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.policy.platforms import Platforms

OFFLINE_MODEL = "offline"
# The shortest NERVE_TURN_LEASE accepted, in seconds.
MIN_TURN_LEASE = 2.0


# Where every settings class reads from: the environment and `.env`. Empty values count as unset, so
# a copy of .env.example works as it is. The front ends' own settings read the same sources.
SETTINGS_SOURCES = SettingsConfigDict(
    env_file=".env", env_file_encoding="utf-8", extra="ignore", env_ignore_empty=True
)


class Settings(BaseSettings):
    """The core's settings, each in `.env.example` with its default; front ends add their own."""

    model_config = SETTINGS_SOURCES
    # The chat platforms the front ends speak on, which the core is built with (the grammar of
    # places in the servers file, people's sign-in ids, the advice on starting afresh): not read from
    # the environment, each front end describes its own (`adapters.settings`). The core alone knows none.
    platforms: ClassVar[Platforms] = Platforms()

    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    nerve_model: str = "gpt-4o-mini"
    # The primary model and its fallbacks as a JSON list (name, model, base_url, api_key_env); unset,
    # the OPENAI_* settings above are the one model (`bot.model.models`).
    nerve_models: str | None = None
    # Seconds a model of NERVE_MODELS that failed (unreachable, timed out, 5xx, a long 429) is skipped
    # for its fallbacks; then one request probes it again.
    nerve_model_cool_down: float = Field(default=60.0, gt=0)
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
    # The most turns running at once across all conversations: the ceiling of the limit learnt from
    # the model's answers (`bot.model.concurrency`); and how many more may wait for a slot.
    nerve_max_concurrent_turns: int = Field(default=128, ge=1, le=1000)
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
    # The share of NERVE_CONTEXT_TOKENS the memories a turn may see take at most; 0 sends none
    # (the memory tools stay offered).
    nerve_memory_share: float = Field(default=0.1, ge=0, le=0.5)
    # Memories stay until forgotten; with this on, they follow NERVE_RETENTION_DAYS like conversations.
    nerve_memory_retention: bool = False
    # Schedules one person may have in effect (active or paused) at once; a new one beyond is refused.
    nerve_schedules_per_person: int = Field(default=20, ge=1)
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
    # Seconds after its time a schedule's slot that nothing ran (nerve was stopped) is still run, once,
    # late; older slots are recorded as missed, never run in a burst.
    nerve_schedule_grace: float = Field(default=3600.0, ge=0)

    # Files people share with a message: the largest read (MB), how many one message may carry, and
    # how many MB one turn reads in all; a file past a limit is named in the reply and not read.
    nerve_max_file_mb: float = Field(default=20.0, gt=0)
    nerve_max_files: int = Field(default=10, ge=1, le=100)
    nerve_max_turn_files_mb: float = Field(default=50.0, gt=0)
    # Images shared with a message are shown to the model: "auto" until the provider refuses image
    # input (remembered per model), "on" always, "off" never (it reads the file's name and size).
    nerve_vision: Literal["auto", "on", "off"] = "auto"

    # Prices per model, per million tokens (JSON): `{"gpt-4o-mini": {"prompt": 0.15, "cached": 0.075,
    # "completion": 0.6}}`, so reports and budgets speak in money too, in NERVE_CURRENCY.
    nerve_prices: str = ""
    nerve_currency: str = "USD"
    # Limits per person, place and workspace, per day and month, in tokens or money (JSON; see
    # docs/settings.md): defaults for any of each, overrides by id; NERVE_ADMINS exempt unless told.
    nerve_budgets: str = ""
    # The zone whose midnight starts a budget's day and month.
    nerve_budget_timezone: str = "UTC"

    @field_validator("nerve_budget_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value.strip())
        except (ValueError, ZoneInfoNotFoundError):
            raise ValueError(
                f"NERVE_BUDGET_TIMEZONE: {value!r} is no IANA time zone (e.g. Europe/Paris)"
            ) from None
        return value.strip()

    @field_validator("nerve_llm_stream", "nerve_log_format", "nerve_vision", mode="before")
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
        return frozenset(part.strip() for part in self.nerve_admins.split(",") if part.strip())

    @property
    def uses_offline_model(self) -> bool:
        """No key and no endpoint means no model service to talk to: use the embedded one."""
        if self.nerve_models:
            return False
        return self.nerve_model == OFFLINE_MODEL or (self.openai_api_key is None and not self.openai_base_url)
