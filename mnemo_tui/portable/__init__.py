"""Provides the export format of `mnemo export` / `mnemo import` (docs/export.md): its version, its lines, and
the cursor of an incremental export. Backend-neutral: `portable.export` writes it, `portable.load` reads it."""

from __future__ import annotations

import base64
import binascii
import re
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.errors import ValidationError
from mnemo_tui.limits import MAX_PRINCIPAL, dumps, loads
from mnemo_tui.values.writes import KeptWrite

if TYPE_CHECKING:
    from typing import Any

FORMAT = 1  # the version in the header line; a reader refuses any other
HEADER_KEY = "mnemo_export"
OWN = ""  # the own store's key among a cursor's marks (a domain or an address otherwise)
_ATOM_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


class Marks:
    """Where each exported scope ended: its newest instant and the ids at that instant.

    The next incremental export reads each scope from that instant and leaves those ids out: the
    engine's clock (`max(now, last + 1)` per bucket) puts every later write after it.
    """

    def __init__(self, marks: dict[str, tuple[int, list[str]]] | None = None) -> None:
        self.marks = dict(marks or {})

    def see(self, key: str, created_at: int, atom_id: str) -> None:
        """Note one exported entry (scopes are exported oldest first)."""
        mark = self.marks.get(key)
        if mark is None or created_at > mark[0]:
            self.marks[key] = (created_at, [atom_id])
        elif created_at == mark[0]:
            mark[1].append(atom_id)

    def encode(self) -> str:
        body = dumps({"v": FORMAT, "marks": {k: [t, ids] for k, (t, ids) in sorted(self.marks.items())}})
        return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")

    @staticmethod
    def decode(text: str) -> Marks:
        """Raises ValidationError: not the `cursor` of an export's end line."""
        refused = ValidationError("--cursor is not an export cursor (take the `cursor` of an export's end line)")
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            body = loads(raw)
        except (binascii.Error, ValueError):
            raise refused from None
        marks = body.get("marks") if isinstance(body, dict) and body.get("v") == FORMAT else None
        if not isinstance(marks, dict):
            raise refused
        found: dict[str, tuple[int, list[str]]] = {}
        for key, mark in marks.items():
            if not (
                isinstance(mark, list) and len(mark) == 2 and isinstance(mark[0], int) and isinstance(mark[1], list)
            ):
                raise refused
            found[key] = (mark[0], [str(i) for i in mark[1]])
        return Marks(found)


def header(backend_kind: str, source: str, principal: str, scopes: list[str | None], since: int | None) -> str:
    """The first line: the format version and what was exported."""
    return dumps(
        {
            HEADER_KEY: FORMAT,
            "exported_at": timefmt.to_iso(timefmt.now_us()),
            "backend": backend_kind,
            "source": source,
            "principal": principal,
            "scopes": scopes,
            "since": None if since is None else timefmt.to_iso(since),
        }
    )


def check_header(line: bytes, name: str) -> dict[str, Any]:
    """The header line, checked.

    Raises:
        ValidationError: not an export of mnemo, or one of another format version.
    """
    try:
        head = loads(line)
    except ValueError:
        head = None
    if not isinstance(head, dict) or HEADER_KEY not in head:
        raise ValidationError(f"{name} is not a mnemo export: its first line is not the header (docs/export.md)")
    version = head[HEADER_KEY]
    if type(version) is not int or version != FORMAT:  # `true == 1` and `1.0 == 1` in Python: neither is 1
        raise ValidationError(
            f"{name} is an export of format version {version!r}; this mnemo reads version {FORMAT} only "
            "(export again with the same mnemo version, or upgrade the one that imports)"
        )
    return head


def entry_of(item: dict[str, Any]) -> tuple[int, KeptWrite, str | None]:
    """An entry line as its time, the write that keeps it, and the id it says superseded it.

    Raises:
        ValidationError: a field missing or of the wrong type (bounds are the engine's `check_write`).
    """
    atom_id = item.get("atom_id")
    if not isinstance(atom_id, str) or not _ATOM_ID.match(atom_id):
        raise ValidationError("atom_id is not a lower-case UUID")
    created = item.get("created_at")
    if not isinstance(created, str):
        raise ValidationError("created_at must be a time")
    provenance = item.get("provenance") or {}
    concepts = item.get("concepts") or []
    supersedes = item.get("supersedes") or []
    metadata = item.get("metadata")
    if not isinstance(provenance, dict) or not isinstance(provenance.get("principal"), str):
        raise ValidationError("provenance.principal must be text")
    principal = provenance["principal"]
    if not principal.strip() or len(principal) > MAX_PRINCIPAL or "\x00" in principal:
        # A principal, not a text to cut: a key's principal is 1 to 200 characters (engine/keys.py).
        raise ValidationError(f"provenance.principal must be 1 to {MAX_PRINCIPAL} characters, with no NUL")
    if not isinstance(concepts, list) or not all(isinstance(c, str) for c in concepts):
        raise ValidationError("concepts must be a list of text")
    if not isinstance(supersedes, list) or not all(isinstance(s, str) for s in supersedes):
        raise ValidationError("supersedes must be a list of ids")
    if metadata is not None and not isinstance(metadata, dict):
        raise ValidationError("metadata must be an object")
    texts = {k: item.get(k) for k in ("content", "domain", "external_ref")}
    texts.update({k: provenance.get(k) for k in ("agent", "agent_name", "client_env")})
    for field, value in texts.items():
        if value is not None and not isinstance(value, str):
            raise ValidationError(f"{field} must be text")
    if not isinstance(texts["content"], str) or not isinstance(texts["domain"], str):
        raise ValidationError("content and domain are required")
    write = KeptWrite(
        atom_id=atom_id,
        author=principal,
        content=texts["content"],
        domain=texts["domain"],
        concepts=tuple(concepts),
        metadata=metadata or None,
        external_ref=texts["external_ref"],
        supersedes=tuple(supersedes),
        agent=texts["agent"],
        agent_name=texts["agent_name"],
        client_env=texts["client_env"],
    )
    later = item.get("superseded_by")
    return timefmt.parse_iso(created, field="created_at"), write, later if isinstance(later, str) else None
