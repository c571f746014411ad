"""Provides the supersession chain of an entry: the revisions it replaced and the one that replaced it."""

from __future__ import annotations

from mnemo_tui.backends import Backend
from mnemo_tui.errors import MnemoError
from mnemo_tui.values.model import Entry, Value

MAX_STEPS = 10


class Chain(Value):
    """Older revisions (newest first) and newer ones (oldest first); ids that could not be read."""

    older: tuple[Entry, ...]
    newer: tuple[Entry, ...]
    unreadable: tuple[str, ...]


def supersession_chain(backend: Backend, entry: Entry, steps: int = MAX_STEPS) -> Chain:
    """Follow `supersedes` back and `superseded_by` forward, at most `steps` each way."""
    unreadable: list[str] = []
    seen = {entry.atom_id}

    def read(atom: str) -> Entry | None:
        seen.add(atom)
        try:
            return backend.get(atom)
        except MnemoError:
            unreadable.append(atom)
            return None

    older: list[Entry] = []
    frontier = list(entry.supersedes)
    while frontier and len(older) < steps:
        atom = frontier.pop(0)
        found = read(atom) if atom not in seen else None
        if found is not None:
            older.append(found)
            frontier.extend(found.supersedes)
    newer: list[Entry] = []
    current = entry.superseded_by
    while current and current not in seen and len(newer) < steps:
        found = read(current)
        if found is None:
            break
        newer.append(found)
        current = found.superseded_by
    return Chain(tuple(older), tuple(newer), tuple(unreadable))
