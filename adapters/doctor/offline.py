"""The model check when no model service is configured: the built-in offline model, said plainly,
with how to use a real one. Kept apart from the service check so a run without a service never
loads the model client."""

from __future__ import annotations

from adapters.doctor.report import Check, ok
from bot.config import OFFLINE_MODEL, Settings

NAME = "model"


def offline_check(settings: Settings) -> Check:
    why = (
        f"NERVE_MODEL is '{OFFLINE_MODEL}'"
        if settings.nerve_model == OFFLINE_MODEL
        else "neither OPENAI_API_KEY nor OPENAI_BASE_URL is set"
    )
    return ok(
        NAME,
        f"the built-in offline model ({why}): rule-based, not a language model; for a real one set "
        "OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible server), and NERVE_MODEL",
    )
