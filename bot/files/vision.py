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
    """Each configured model's ability to see, as far as this nerve knows it: a refusal is the
    refusing model's own (a text-only fallback's says nothing of the primary or a place's model)."""

    def __init__(self, mode: VisionMode, model: str, ledger: VisionLedger | None) -> None:
        self.mode = mode
        # The primary's name: the model asked about when none is named.
        self.model = model
        self._ledger = ledger
        # Read from the store once per model, then kept: only this process's own refusal changes it.
        self._refuses: dict[str, bool] = {}

    async def sees(self, model: str | None = None) -> bool:
        """Whether this turn shows its images to `model` (the one its place asks first)."""
        if self.mode != "auto":
            return self.mode == "on"
        name = model or self.model
        if name not in self._refuses:
            self._refuses[name] = await self._ledger.refuses_images(name) if self._ledger else False
        return not self._refuses[name]

    async def refused(self, model: str | None = None) -> None:
        """The provider of `model` refused images: never sent to it again, after a restart too."""
        name = model or self.model
        logger.warning("the model %s refuses image input; images are described by name from now on", name)
        self._refuses[name] = True
        if self._ledger is not None:
            await self._ledger.set_refuses_images(name)
