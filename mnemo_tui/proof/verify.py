"""Provides `verify`: walk a scope by cursor and report every expected id missing and every id returned twice."""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemo_tui.backends import Backend
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import RecentQuery
from mnemo_tui.walk import Walk

WALK_LIMIT = 100


@dataclass(frozen=True)
class VerifyResult:
    """What one verification walk found."""

    expected: int
    seen: int
    missing: tuple[str, ...]
    repeated: tuple[str, ...]
    pages: int

    @property
    def passed(self) -> bool:
        return not self.missing and not self.repeated

    def wire(self) -> dict[str, Any]:
        """CLI.md: `{"passed", "expected", "seen", "missing": [...], "repeated": [...]}`."""
        return {
            "passed": self.passed,
            "expected": self.expected,
            "seen": self.seen,
            "missing": list(self.missing),
            "repeated": list(self.repeated),
        }


def _canonical(text: str, where: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise ValidationError(f"{where}: {text[:60]!r} is not an atom id") from None


def parse_expected(text: str, source: str = "--expect") -> list[str]:
    """The expected ids of a file: one id a line, or NDJSON lines carrying `atom_id` (mixed is fine).

    Blank lines and lines starting with `#` are skipped; repeated ids count once; order is kept.

    Raises:
        ValidationError: a line that is neither an atom id nor a JSON object with a string `atom_id`.
    """
    ids: dict[str, None] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{source} line {number}"
        if line.startswith("{"):
            try:
                item = json.loads(line)
            except ValueError:
                raise ValidationError(f"{where} is not valid JSON") from None
            value = item.get("atom_id") if isinstance(item, dict) else None
            if not isinstance(value, str):
                raise ValidationError(f"{where} is a JSON object without a string atom_id")
            line = value
        ids[_canonical(line, where)] = None
    return list(ids)


def read_expected(path: str) -> list[str]:
    """Read the expected ids from a file, or from stdin when `path` is `-`.

    Raises:
        ValidationError: the file cannot be read or decoded, or a line is not an id (exit 2).
    """
    source = "stdin" if path == "-" else path
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot read --expect {source}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValidationError(f"cannot read --expect {source}: it is not UTF-8 text") from None
    return parse_expected(text, source)


def verify(
    backend: Backend, expected: list[str], *, scope: str | None = None, since: int | None = None
) -> VerifyResult:
    """Walk `scope` by cursor to the end and compare what came back with `expected`.

    Raises:
        BrokenFeed: the backend handed back a cursor that does not advance (the walk would loop).
    """
    repeated: dict[str, None] = {}
    walk = Walk(
        backend,
        RecentQuery(scope=scope, since=since, limit=WALK_LIMIT),
        hold_all=True,
        on_repeat=lambda entry: repeated.setdefault(entry.atom_id.lower()),
    )
    seen = {entry.atom_id.lower() for fresh in walk.pages() for entry in fresh}
    missing = tuple(i for i in expected if i not in seen)
    return VerifyResult(
        expected=len(expected), seen=len(seen), missing=missing, repeated=tuple(repeated), pages=walk.progress.pages
    )
