"""Provides `NewEntries`: the one source of what is new to the consumer in each scope (the sidebar's counts,
the feed's `●`), from its watermarks as `mnemo catchup` reads them and kept true by the feed's live updates."""

from __future__ import annotations

from collections.abc import Iterable

from mnemo_tui.catchup.walk import Start, unread
from mnemo_tui.limits import room_of
from mnemo_tui.tui.data.scopes import COUNT_CAP, format_count
from mnemo_tui.values.model import Entry, Watermark

# Arrivals remembered for the counts still being walked (a walk read before them must not lose them).
LOG_CAP = 1000


def covering(domain: str) -> tuple[str | None, ...]:
    """The scopes an entry of `domain` counts in: its own domain or room, and (not a room) the own store."""
    return (domain,) if room_of(domain) is not None else (domain, None)


class NewEntries:
    """Per scope: the consumer's watermark and the ids of the entries new to it (at most `cap + 1`).

    A count is a walk from the watermark (`scopes.new_ids`, the walk `catchup` makes); entries the feed
    shows arriving (a poll, or the push) join every scope they count in at once, and entries removed
    leave. Ids, not numbers: an arrival the walk also saw is one entry, whichever comes first.
    """

    def __init__(self, overlap: int, cap: int = COUNT_CAP) -> None:
        self.overlap = overlap
        self.cap = cap
        self.marks: dict[str | None, Watermark | None] = {}
        self._rules: dict[str | None, Start] = {}
        self._ids: dict[str | None, set[str]] = {}
        self._removed: set[str] = set()
        self._log: list[tuple[int, str | None, int, str]] = []  # (sequence, scope, created_at, atom_id)
        self._seq = 0

    def begin(self) -> int:
        """Where a walk starts in the arrivals: what arrives after it is added to its result."""
        return self._seq

    def counted(self, scope: str | None, watermark: Watermark | None, ids: Iterable[str], begun: int) -> None:
        """A walk's result: the scope's watermark and the ids new to it when it read."""
        rule = unread(watermark, self.overlap)
        found = set(ids) - self._removed
        later = (atom for seq, where, at, atom in self._log if seq > begun and where == scope and rule.is_new(at, atom))
        found |= {atom for atom in later if atom not in self._removed}
        self.marks[scope] = watermark
        self._rules[scope] = rule
        self._ids[scope] = found

    def arrived(self, entries: Iterable[Entry]) -> set[str | None]:
        """Entries the feed shows arriving: each new one joins the scopes it counts in. Returns those changed."""
        changed: set[str | None] = set()
        for entry in entries:
            if entry.atom_id in self._removed:
                continue
            for scope in covering(entry.domain):
                self._seq += 1
                self._log.append((self._seq, scope, entry.created_at, entry.atom_id))
                rule, ids = self._rules.get(scope), self._ids.get(scope)
                if rule is None or ids is None or not rule.is_new(entry.created_at, entry.atom_id):
                    continue
                if entry.atom_id not in ids and len(ids) <= self.cap:
                    ids.add(entry.atom_id)
                    changed.add(scope)
        del self._log[:-LOG_CAP]
        return changed

    def removed(self, ids: set[str]) -> set[str | None]:
        """Entries removed (ids are never reused): they leave every count. Returns the scopes changed."""
        self._removed |= ids
        changed = {scope for scope, held in self._ids.items() if not held.isdisjoint(ids)}
        for scope in changed:
            self._ids[scope] -= ids
        return changed

    def count(self, scope: str | None) -> int | None:
        """How many entries are new in a scope (past the cap: `cap + 1`), None before its first count."""
        ids = self._ids.get(scope)
        return None if ids is None else len(ids)

    def shown(self, scope: str | None) -> str:
        """The count as the sidebar shows it: `12`, `99+`, blank for none."""
        return format_count(self.count(scope) or 0, self.cap)
