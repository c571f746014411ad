"""Provides `verify`: walk a scope by cursor and report every expected id missing and every id returned twice."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

from mnemo_tui.backends import Backend
from mnemo_tui.catchup.walk import Walk
from mnemo_tui.errors import Forbidden, NotFound, ValidationError
from mnemo_tui.limits import NotJson, loads, room_of
from mnemo_tui.values.model import RecentQuery, Value

WALK_LIMIT = 100
# Missing ids looked up one by one to say where they are instead: enough for a person to see why.
SIGHTINGS_LOOKED_UP = 50
FIRST_LINE_CHARS = 120


class Sighting(Value):
    """A missing id the walk did not return that the backend still shows elsewhere, and why it was not walked."""

    atom_id: str
    where: str
    first_line: str

    @property
    def note(self) -> str:
        """`superseded by …: 'first line'`, one line of raw text (sanitize before a terminal)."""
        return f"{self.where}: '{self.first_line}'"


class VerifyResult(Value):
    """What one verification walk found."""

    expected: int
    seen: int
    missing: tuple[str, ...]
    repeated: tuple[str, ...]
    pages: int
    sightings: tuple[Sighting, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.missing and not self.repeated

    def wire(self) -> dict[str, Any]:
        """docs/cli.md: `{"passed", "expected", "seen", "missing": [...], "repeated": [...]}`."""
        return {
            "passed": self.passed,
            "expected": self.expected,
            "seen": self.seen,
            "missing": list(self.missing),
            "repeated": list(self.repeated),
        }

    def sighting(self, atom_id: str) -> Sighting | None:
        """Where a missing id is seen elsewhere, if it was looked up and found."""
        return next((s for s in self.sightings if s.atom_id == atom_id), None)


def _canonical(text: str, where: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise ValidationError(f"{where}: '{text[:60]}' is not an atom id") from None  # sanitized once, where shown


def _id_of_item(item: Any, where: str) -> str:
    """An id from one JSON value: an id string, or an object (a wire item) with a string `atom_id`."""
    value = item.get("atom_id") if isinstance(item, dict) else item
    if not isinstance(value, str):
        raise ValidationError(f"{where} is neither an id nor a JSON object with a string atom_id")
    return _canonical(value.strip(), where)


def parse_expected(text: str, source: str = "--expect") -> list[str]:
    """The expected ids of a text, in any of the shapes mnemo prints or a script writes (docs/ci.md).

    - `[` first: a JSON array of ids or of objects with `atom_id`;
    - `{` first and the whole text parses: one document, either an item (`atom_id`) or a page
      (`items`: the `--format json` of `recent`, `catchup`, `search`);
    - anything else (an unparsable `{` text included): lines, each an id or an NDJSON object with
      `atom_id` (mixed is fine); blank lines and lines starting with `#` are skipped.

    Repeated ids count once; order is kept.

    Raises:
        ValidationError: a value that is not an id, JSON that does not parse where it must (exit 2).
    """
    body = text.strip().lstrip("\ufeff")
    if body.startswith("["):
        try:
            items = loads(body)
        except NotJson as exc:
            raise ValidationError(f"{source} starts with '[' but is not a JSON array ({exc})") from None
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"{source} line {_line_of(text, body, exc.pos)} starts with '[' but is not a JSON array ({exc.msg})"
            ) from None
        if not isinstance(items, list):
            raise ValidationError(f"{source} starts with '[' but is not a JSON array")
        return list(dict.fromkeys(_id_of_item(item, f"{source} item {n}") for n, item in enumerate(items, 1)))
    if body.startswith("{"):
        try:
            document = loads(body)
        except ValueError:
            document = None  # not one document: NDJSON, read line by line below
        if isinstance(document, dict):
            if "atom_id" in document:
                return [_id_of_item(document, source)]
            items = document.get("items")
            if not isinstance(items, list):
                raise ValidationError(f"{source} is a JSON document with neither atom_id nor a list of items")
            return list(dict.fromkeys(_id_of_item(item, f"{source} item {n}") for n, item in enumerate(items, 1)))
    return _parse_lines(text, source)


def _line_of(text: str, body: str, pos: int) -> int:
    """The line of `text` holding position `pos` of `body` (`text` stripped of white space and a BOM)."""
    return text.count("\n", 0, text.find(body[:1]) + pos) + 1


def _parse_lines(text: str, source: str) -> list[str]:
    ids: dict[str, None] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip().lstrip("\ufeff")
        if not line or line.startswith("#"):
            continue
        where = f"{source} line {number}"
        if line.startswith("{"):
            try:
                item = loads(line)
            except NotJson as exc:
                raise ValidationError(f"{where} is not valid JSON: {exc}") from None
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
    if path == "-" and sys.stdin.isatty():
        # Waiting for ids typed at a terminal would look like a hang in a job's log.
        raise ValidationError(
            "--expect - reads the ids from a pipe, but stdin is a terminal: pipe them in, or name a file"
        )
    try:
        raw = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
        text = raw.decode("utf-8")
    except OSError as exc:
        raise ValidationError(f"cannot read --expect {source}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValidationError(f"cannot read --expect {source}: it is not UTF-8 text") from None
    expected = parse_expected(text, source)
    if not expected:
        # A producer step that wrote nothing would turn into a green proof of nothing.
        raise ValidationError(f"no ids in --expect {source}: a verification of no ids proves nothing")
    return expected


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
        expected=len(expected),
        seen=len(seen),
        missing=missing,
        repeated=tuple(repeated),
        pages=walk.progress.pages,
        sightings=_sightings(backend, missing[:SIGHTINGS_LOOKED_UP], scope, since),
    )


def _sightings(
    backend: Backend, missing: tuple[str, ...], scope: str | None, since: int | None
) -> tuple[Sighting, ...]:
    """Look each missing id up directly: one superseded, outside the scope or older than `since` is
    not lost, and saying so spares a person the search. An id the backend does not show is just missing.

    Raises:
        AuthError, Unavailable, RateLimited, LocalStateError: the backend cannot be asked (the exit code says so).
    """
    found = []
    names: dict[str, str] | None = None  # room id -> name, listed at the first room entry met
    for atom_id in missing:
        try:
            entry = backend.get(atom_id)
        except (NotFound, Forbidden, ValidationError):
            continue
        if entry.superseded_by:
            where = f"superseded by {entry.superseded_by}"
        elif since is not None and entry.created_at < since:
            where = "written before --since"
        elif (room := room_of(entry.domain)) is not None and entry.domain != scope:
            # Not in the own-store walk (no --scope) nor in the room walked: not lost, just elsewhere.
            if names is None:
                names = {r.room_id: r.name for r in backend.rooms()}
            where = f"outside the scope walked (room '{names.get(room, room)}')"
        elif scope is not None and entry.domain != scope:
            where = f"outside the scope walked (domain '{entry.domain}')"
        else:
            where = "shown by id but not by the walk"
        found.append(Sighting(atom_id, where, entry.first_line[:FIRST_LINE_CHARS]))
    return tuple(found)
