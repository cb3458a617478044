"""The one line a long-running front end logs once it is up: where it listens, or as whom it is
connected. Operators look for it first, so it shows at the default NERVE_LOG_LEVEL (WARNING) too,
as an INFO line; NERVE_LOG_LEVEL=ERROR (problems only) leaves it out."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("nerve.up")
# Its own level, so that the root logger's WARNING does not hide it (handlers pass every level).
logger.setLevel(logging.INFO)


def log_up(message: str, *args: Any) -> None:
    if logging.getLogger().getEffectiveLevel() <= logging.WARNING:
        logger.info(message, *args)
