"""The bot's installs in many workspaces, sealed at rest with NERVE_SECRET_KEY like sign-in tokens.

A front end keeps each workspace's installation (its tokens among it) as a JSON value; only the
sealed bytes reach the store. A value sealed under another key reads as no install (install again).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.mcp.auth.vault import Vault
from bot.store.installs import InstallLedger, StoredInstall


@dataclass(frozen=True, slots=True, kw_only=True)
class Install:
    """One workspace's install as a front end gave it: `value` is its own JSON (tokens included)."""

    platform: str
    workspace: str
    enterprise: str
    org_wide: bool
    name: str
    value: dict[str, Any]
    installed_at: float


class WorkspaceInstalls:
    """Installs and install states over the store, with every install sealed by the vault."""

    def __init__(self, ledger: InstallLedger, vault: Vault, clock: Callable[[], float] = time.time) -> None:
        self._ledger = ledger
        self._vault = vault
        self._clock = clock

    async def keep(
        self,
        platform: str,
        workspace: str,
        value: dict[str, Any],
        *,
        enterprise: str,
        org_wide: bool,
        name: str,
    ) -> None:
        await self._ledger.keep_install(
            StoredInstall(
                platform=platform,
                workspace=workspace,
                enterprise=enterprise,
                org_wide=org_wide,
                name=name,
                secret=self._vault.seal(value),
                installed_at=self._clock(),
            )
        )

    async def find(self, platform: str, workspace: str) -> Install | None:
        stored = await self._ledger.stored_install(platform, workspace)
        return self._opened(stored) if stored is not None else None

    async def forget(self, platform: str, workspace: str) -> bool:
        return await self._ledger.drop_install(platform, workspace)

    async def all(self, platform: str) -> list[Install]:
        opened = [self._opened(stored) for stored in await self._ledger.stored_installs(platform)]
        return [install for install in opened if install is not None]

    async def issue_state(self, state: str, lifetime: float) -> None:
        now = self._clock()
        await self._ledger.issue_install_state(state, now + lifetime, now)

    async def take_state(self, state: str) -> bool:
        return await self._ledger.take_install_state(state, self._clock())

    def _opened(self, stored: StoredInstall) -> Install | None:
        value = self._vault.open(stored.secret)
        if not isinstance(value, dict):
            return None  # sealed under another key: as good as not installed
        return Install(
            platform=stored.platform,
            workspace=stored.workspace,
            enterprise=stored.enterprise,
            org_wide=stored.org_wide,
            name=stored.name,
            value=value,
            installed_at=stored.installed_at,
        )


def workspace_installs(store: object, secret_key: str | None) -> WorkspaceInstalls | None:
    """The installs over `store` when it keeps them and a secret key seals them; else None."""
    if secret_key is None or not isinstance(store, InstallLedger):
        return None
    return WorkspaceInstalls(store, Vault(secret_key))
