"""Encryption at rest for sign-in tokens and client registrations (Fernet, under NERVE_SECRET_KEY).

A changed key makes stored tokens unreadable, which means "sign in again", never a crash."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from bot.errors import ConfigError

MIN_KEY_CHARS = 16


def new_secret_key() -> str:
    """A fresh value for NERVE_SECRET_KEY (`nerve secret-key` prints one)."""
    return Fernet.generate_key().decode()


class Vault:
    """Seals and opens JSON values with the operator's secret key."""

    def __init__(self, secret_key: str) -> None:
        if len(secret_key) < MIN_KEY_CHARS:
            raise ConfigError(
                f"NERVE_SECRET_KEY is too short ({len(secret_key)} characters): use at least"
                f" {MIN_KEY_CHARS}, e.g. the output of `nerve secret-key`"
            )
        self._fernet = Fernet(_fernet_key(secret_key))

    def seal(self, value: Any) -> bytes:
        return self._fernet.encrypt(json.dumps(value, separators=(",", ":")).encode())

    def open(self, sealed: bytes) -> Any | None:
        """The value, or None when it was sealed under another key (or tampered with)."""
        try:
            return json.loads(self._fernet.decrypt(sealed))
        except (InvalidToken, ValueError):
            return None


def _fernet_key(secret_key: str) -> bytes:
    """A Fernet key as given (`nerve secret-key`), or one derived from any other long passphrase."""
    with contextlib.suppress(ValueError):
        if len(base64.urlsafe_b64decode(secret_key.encode())) == 32:
            return secret_key.encode()
    return base64.urlsafe_b64encode(hashlib.sha256(secret_key.encode()).digest())
