"""Installs of the bot in many workspaces, and the single-use states of installs under way.

Values are sealed (`bot.installs`) before they get here; this layer stores bytes. Taking a state
deletes it in the same statement, so a state is good once, in any process.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.store.dialect import Ledger


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredInstall:
    """One workspace's install: `workspace` is a team, or an organization when `org_wide`."""

    platform: str
    workspace: str
    enterprise: str
    org_wide: bool
    name: str
    secret: bytes
    installed_at: float


_COLUMNS = "platform, workspace, enterprise, org_wide, name, secret, installed_at"


def _install(row: tuple[object, ...]) -> StoredInstall:
    platform, workspace, enterprise, org_wide, name, secret, installed_at = row
    return StoredInstall(
        platform=str(platform),
        workspace=str(workspace),
        enterprise=str(enterprise),
        org_wide=bool(org_wide),
        name=str(name),
        secret=bytes(secret),  # type: ignore[call-overload]
        installed_at=float(installed_at),  # type: ignore[arg-type]
    )


class InstallLedger(Ledger):
    async def keep_install(self, install: StoredInstall) -> None:
        """Store an install, replacing the workspace's earlier one (a reinstall brings new tokens)."""
        await self._change(
            f"INSERT INTO workspace_installs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (platform, workspace) DO UPDATE SET enterprise = excluded.enterprise,"
            " org_wide = excluded.org_wide, name = excluded.name, secret = excluded.secret,"
            " installed_at = excluded.installed_at",
            (
                install.platform,
                install.workspace,
                install.enterprise,
                int(install.org_wide),
                install.name,
                install.secret,
                install.installed_at,
            ),
        )

    async def stored_install(self, platform: str, workspace: str) -> StoredInstall | None:
        row = await self._first(
            f"SELECT {_COLUMNS} FROM workspace_installs WHERE platform = ? AND workspace = ?",
            (platform, workspace),
        )
        return _install(tuple(row)) if row else None

    async def drop_install(self, platform: str, workspace: str) -> bool:
        deleted = await self._change(
            "DELETE FROM workspace_installs WHERE platform = ? AND workspace = ?", (platform, workspace)
        )
        return deleted > 0

    async def stored_installs(self, platform: str) -> list[StoredInstall]:
        rows = await self._rows(
            f"SELECT {_COLUMNS} FROM workspace_installs WHERE platform = ? ORDER BY workspace", (platform,)
        )
        return [_install(tuple(row)) for row in rows]

    async def issue_install_state(self, state: str, expires_at: float, now: float) -> None:
        """Record an install's state; expired ones are removed."""
        async with self._write() as db:
            await db.execute("DELETE FROM install_states WHERE expires_at <= ?", (now,))
            await db.execute(
                "INSERT INTO install_states (state, expires_at) VALUES (?, ?)", (state, expires_at)
            )

    async def take_install_state(self, state: str, now: float) -> bool:
        """Whether `state` was issued and has not expired; it is gone afterwards either way."""
        async with self._write() as db:
            rows = await db.execute_fetchall(
                "DELETE FROM install_states WHERE state = ? RETURNING expires_at", (state,)
            )
        return bool(rows) and float(rows[0][0]) > now
