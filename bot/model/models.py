"""The configured models: the primary and its fallbacks, from NERVE_MODELS, the servers file or OPENAI_*.

Read once at start-up. A key is named by the environment variable that holds it, never written in
the list itself: the list sits in files people share and paste into issues.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from bot.config import Settings
from bot.errors import ConfigError

# Fields people write a key under by habit; each is refused with the field to use instead.
_INLINE_KEY_FIELDS = ("api_key", "apiKey", "key", "token", "secret", "password")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ModelEntry(BaseModel):
    """One entry of the `models` list, as written."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1)
    model: str = Field(min_length=1)
    base_url: str | None = None
    # The NAME of the environment variable that holds the key (OPENAI_API_KEY, GROQ_KEY, …).
    api_key_env: str | None = None
    # Seconds one request may take, and retries on this model before the next one is asked;
    # unset: NERVE_LLM_TIMEOUT, and NERVE_LLM_MAX_RETRIES for the last model, one retry for the others.
    timeout: float | None = Field(default=None, gt=0)
    max_retries: int | None = Field(default=None, ge=0, le=10)

    @field_validator("api_key_env")
    @classmethod
    def _a_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.match(value):
            raise ValueError(
                "must be the NAME of an environment variable holding the key (like OPENAI_API_KEY),"
                " not the key itself"
            )
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """One model ready to be asked: where, which, with what key, and its own limits."""

    name: str
    model: str
    base_url: str | None
    api_key: SecretStr | None
    api_key_env: str | None
    timeout: float
    max_retries: int


@dataclass(frozen=True, slots=True)
class ModelList:
    """The primary first, then its fallbacks in the order they are tried."""

    specs: tuple[ModelSpec, ...]
    # Where the list was read from, for messages: "NERVE_MODELS", the servers file, or "OPENAI_*".
    source: str = "OPENAI_*"

    @property
    def primary(self) -> ModelSpec:
        return self.specs[0]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.specs)

    def get(self, name: str) -> ModelSpec | None:
        return next((spec for spec in self.specs if spec.name == name), None)


def configured_models(
    settings: Settings,
    file_models: Sequence[Any] | None = None,
    *,
    file_name: str = "the servers file",
    environ: Mapping[str, str] | None = None,
) -> ModelList | None:
    """The models to ask, or None for the offline model (no `models` list, no key, no endpoint)."""
    env = os.environ if environ is None else environ
    if settings.nerve_models and file_models is not None:
        raise ConfigError(
            f"models are listed both in NERVE_MODELS and in {file_name}'s 'models': keep one of them"
        )
    if settings.nerve_models:
        try:
            raw: object = json.loads(settings.nerve_models)
        except ValueError as exc:
            raise ConfigError(f"NERVE_MODELS is not a JSON list: {exc}") from None
        return _parsed(raw, "NERVE_MODELS", settings, env)
    if file_models is not None:
        return _parsed(list(file_models), f"{file_name} 'models'", settings, env)
    if settings.uses_offline_model:
        return None
    only = ModelSpec(
        name=settings.nerve_model,
        model=settings.nerve_model,
        base_url=settings.openai_base_url,
        api_key=settings.openai_api_key,
        api_key_env="OPENAI_API_KEY" if settings.openai_api_key is not None else None,
        timeout=settings.nerve_llm_timeout,
        max_retries=settings.nerve_llm_max_retries,
    )
    return ModelList((only,))


def _parsed(raw: object, source: str, settings: Settings, env: Mapping[str, str]) -> ModelList:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(
            f"{source} must be a non-empty JSON list of models (name, model, base_url, api_key_env)"
        )
    entries: list[ModelEntry] = []
    for index, item in enumerate(raw):
        label = f"{source} entry {index + 1}"
        if isinstance(item, dict):
            label = f"{source} entry '{item.get('name') or item.get('model') or index + 1}'"
            if inline := next((field for field in _INLINE_KEY_FIELDS if field in item), None):
                raise ConfigError(
                    f"{label} field '{inline}': a key is never written in the models list; put it in an"
                    " environment variable and give that variable's NAME as 'api_key_env'"
                )
        try:
            entries.append(ModelEntry.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(
                f"field '{'.'.join(map(str, e['loc'])) or '(entry)'}': "
                + e["msg"].removeprefix("Value error, ")
                for e in exc.errors()
            )
            raise ConfigError(f"{label}: {problems}") from None
    specs: list[ModelSpec] = []
    for index, entry in enumerate(entries):
        name = entry.name or entry.model
        if any(spec.name == name for spec in specs):
            raise ConfigError(f"{source}: two models are named '{name}'; give each a distinct 'name'")
        key: SecretStr | None = None
        if entry.api_key_env is not None:
            value = env.get(entry.api_key_env, "").strip()
            if not value:
                raise ConfigError(
                    f"{source} model '{name}' field 'api_key_env': the environment variable"
                    f" {entry.api_key_env} is not set"
                )
            key = SecretStr(value)
        last = index == len(entries) - 1
        specs.append(
            ModelSpec(
                name=name,
                model=entry.model,
                base_url=entry.base_url,
                api_key=key,
                api_key_env=entry.api_key_env,
                timeout=entry.timeout or settings.nerve_llm_timeout,
                # A model with a fallback behind it gives way quickly: the next one answers instead.
                max_retries=entry.max_retries
                if entry.max_retries is not None
                else (settings.nerve_llm_max_retries if last else min(1, settings.nerve_llm_max_retries)),
            )
        )
    return ModelList(tuple(specs), source=source)


def check_place_models(models: ModelList | None, wanted: Mapping[str, str]) -> None:
    """Every model the policy names for a place must be in the list (`wanted`: place → model name)."""
    for place, name in wanted.items():
        if models is None:
            raise ConfigError(
                f"policy '{place}' field 'model': names model '{name}', but no model service is"
                " configured (set NERVE_MODELS or OPENAI_API_KEY)"
            )
        if models.get(name) is None:
            known = ", ".join(models.names)
            raise ConfigError(
                f"policy '{place}' field 'model': '{name}' is not one of the configured models ({known})"
            )


def key_values(listed: str | Sequence[Any] | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The keys a `models` list names by variable, for logs and reports to hide; a list that does
    not parse names none (reading it at start-up says what is wrong)."""
    env = os.environ if environ is None else environ
    raw: object = listed
    if isinstance(listed, str):
        try:
            raw = json.loads(listed)
        except ValueError:
            return []
    if not isinstance(raw, list):
        return []
    names = [item.get("api_key_env") for item in raw if isinstance(item, dict)]
    return [env[name] for name in names if isinstance(name, str) and env.get(name)]
