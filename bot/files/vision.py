"""Whether images are shown to the model (NERVE_VISION), and what a provider's refusal of them teaches.

"auto" sends images until the provider answers a request carrying them with a refusal that names
images (`ImagesRefused`); that is remembered per model in the store, so neither this process nor the
next one sends it images again. "on" always sends them (a refusal is an error), "off" never does.
"""

from __future__ import annotations

import logging
from typing import Literal, Protocol

logger = logging.getLogger(__name__)

VisionMode = Literal["auto", "on", "off"]


class VisionLedger(Protocol):
    async def refuses_images(self, model: str) -> bool: ...

    async def set_refuses_images(self, model: str) -> None: ...


class Vision:
    """One model's ability to see, as far as this nerve knows it."""

    def __init__(self, mode: VisionMode, model: str, ledger: VisionLedger | None) -> None:
        self.mode = mode
        self._model = model
        self._ledger = ledger
        # Read from the store once, then kept: only this process's own refusal changes it.
        self._refuses: bool | None = None

    async def sees(self) -> bool:
        """Whether this turn shows its images to the model."""
        if self.mode != "auto":
            return self.mode == "on"
        if self._refuses is None:
            self._refuses = await self._ledger.refuses_images(self._model) if self._ledger else False
        return not self._refuses

    async def refused(self) -> None:
        """The provider refused images: never sent again to this model, after a restart too."""
        logger.warning(
            "the model %s refuses image input; images are described by name from now on", self._model
        )
        self._refuses = True
        if self._ledger is not None:
            await self._ledger.set_refuses_images(self._model)
