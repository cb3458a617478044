"""The model check when no model service is configured: the built-in offline model, said plainly,
with how to use a real one. Kept apart from the service check so a run without a service never
loads the model client."""

from __future__ import annotations

from adapters.doctor.platforms import platforms_set_up
from adapters.doctor.report import Check, ok, warning
from adapters.settings import Settings
from bot.config import OFFLINE_MODEL

NAME = "model"
REAL_MODEL = "set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (any OpenAI-compatible server), and NERVE_MODEL"


def offline_check(settings: Settings) -> Check:
    """Ok for a terminal trying nerve out; a warning once Slack or Discord is set up, since the
    people there would get the rule-based model's answers without knowing why."""
    why = (
        f"NERVE_MODEL is '{OFFLINE_MODEL}'"
        if settings.nerve_model == OFFLINE_MODEL
        else "neither OPENAI_API_KEY nor OPENAI_BASE_URL is set"
    )
    platforms = platforms_set_up(settings)
    if platforms:
        found = (
            f"the built-in offline model ({why}): {platforms} users would get its rule-based answers,"
            " not a language model's"
        )
        return warning(NAME, found, f"for a real model {REAL_MODEL}")
    return ok(
        NAME,
        f"the built-in offline model ({why}): rule-based, not a language model; for a real one {REAL_MODEL}",
    )
