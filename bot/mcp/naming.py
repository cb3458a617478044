"""The names tools and prompts are offered under: unique, look-alikes named, never decided by file order.

A hostile server can list `send_email_` (or `Send-Email`) next to a real server's `send_email`: both
clean up to the same name, and whichever came first in the servers file used to keep the clean one,
so the model's `send_email` reached the squatter. Here every party to such a collision is prefixed
with its server (`mail__send_email`, `squat__send_email_`), so no server ever owns a name another
server's tool also wants, and the outcome depends only on what the servers list, not their order.

Two names collide when they differ only in case or in `-`/`_` runs: a model (or a person picking a
prompt) cannot be relied on to tell `send-email` from `send_email`.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# (server, the name the server gave it)
Entry = tuple[str, str]
# Rounds of prefixing before a hash settles what is left: names collide again only in contrived cases.
_ROUNDS = 4


@dataclass(frozen=True, slots=True)
class Collision:
    """Entries of different servers whose names would have been taken for one another."""

    wanted: str
    parties: tuple[tuple[Entry, str], ...]  # each entry with the name it is offered under now

    def describe(self, kind: str) -> str:
        """One line for an operator: who wanted the name and what each got instead."""
        parts = ", ".join(
            f"{name!r} of server {server!r} as {final!r}" for (server, name), final in self.parties
        )
        return f"{kind} names collide on {self.wanted!r}: offered {parts}"


def collision_key(name: str) -> str:
    """What two names share when people or models would take one for the other."""
    return re.sub(r"[-_]+", "_", name.casefold()).strip("_")


def unique_names(
    entries: Sequence[Entry], *, clean: Callable[[str], str], separator: str
) -> tuple[dict[Entry, str], list[Collision]]:
    """The offered name of each entry, and the collisions that made names longer.

    An entry keeps its own (cleaned) name while no other entry's name collides with it; every party
    to a collision gets `<server><separator><name>`; what still collides after that (a server named
    so that its prefix spells another's) gets a short hash of its server and name. Independent of
    the order of `entries`.
    """
    names = {entry: clean(entry[1]) for entry in entries}
    prefixed: set[Entry] = set()
    collisions: dict[str, list[Entry]] = {}
    for _ in range(_ROUNDS):
        clashes = _clashes(names)
        if not clashes:
            break
        for group in clashes:
            wanted = names[group[0]]
            for entry in group:
                if entry in prefixed:
                    names[entry] = _hashed(names[entry], entry, clean)
                else:
                    prefixed.add(entry)
                    names[entry] = clean(f"{entry[0]}{separator}{entry[1]}")
            collisions.setdefault(collision_key(wanted), []).extend(group)
    for group in _clashes(names):  # contrived names still clashing: a hash each, which cannot collide
        for entry in group:
            names[entry] = _hashed(names[entry], entry, clean)
    found = [
        Collision(wanted=key, parties=tuple((entry, names[entry]) for entry in sorted(set(group))))
        for key, group in sorted(collisions.items())
    ]
    return names, found


def _clashes(names: dict[Entry, str]) -> list[list[Entry]]:
    """Groups of entries of which some collide, each group sorted (so the result is order-free)."""
    by_key: dict[str, list[Entry]] = defaultdict(list)
    for entry, name in names.items():
        by_key[collision_key(name)].append(entry)
    return [sorted(group) for _, group in sorted(by_key.items()) if len(group) > 1]


def _hashed(name: str, entry: Entry, clean: Callable[[str], str]) -> str:
    digest = hashlib.sha1(f"{entry[0]}\0{entry[1]}".encode()).hexdigest()[:6]
    return clean(f"{name[:50]}_{digest}")
