"""Provides an engine's side of `mnemo export` and `mnemo import` (docs/export.md): a scope's entries oldest
first as export lines, the rooms one belongs to with their members, and entries put back with their ids."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.engine.atoms import AtomOps
from mnemo_tui.engine.rules import check_write, with_superseded_by
from mnemo_tui.errors import Conflict, Forbidden, ValidationError
from mnemo_tui.limits import ROOM_ID, dumps, room_of

if TYPE_CHECKING:
    from typing import Any

    from mnemo_tui.values.writes import KeptWrite, WriteRequest, WriteResult

CHUNK = 1000  # entries one insert statement batch holds
# An imported time later than now by more than this is never kept: the bucket's clock would stay ahead
# of every later write for good (docs/export.md). Small, for machines whose clocks differ a little.
FUTURE_SKEW_US = 5 * 60 * 1_000_000


# Characters outside JSON's own escapes that a line reader may split on (Python's `splitlines`): escaped.
_SEPARATORS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def export_line(wire: str, superseded_by: str | None, metadata: str | None, external_ref: str | None) -> str:
    """One entry as an export line: its wire item with its metadata and external_ref, spliced as stored
    (UTF-8; no JSON parsed and written again per entry), with no line separator left raw."""
    line = f'{with_superseded_by(wire, superseded_by)[:-1]},"metadata":{metadata or "{}"},"external_ref":{dumps(external_ref)}}}'
    return line if line.isascii() else line.translate(_SEPARATORS)


def scope_where(engine: AtomOps, principal: str, scope: str | None) -> tuple[str, list[Any]] | None:
    """The rows of one scope the principal may read: a condition on `atoms` and its parameters (None: no bucket).

    Raises:
        Forbidden: a room one is not a member of (or no such room).
    """
    with engine.reading():
        room = room_of(scope) if scope is not None else None
        if room is not None:
            return "bucket = ?", [engine.membership(principal, room)[0]]
        bucket = engine.own_bucket(principal)
    if bucket is None:
        return None
    if scope is None:
        return "bucket = ?", [bucket]
    return "bucket = ? AND domain = ?", [bucket, scope]


def count_rows(engine: AtomOps, principal: str, scope: str | None, since: int | None) -> int:
    """How many entries `export_rows` would yield (for a progress bar)."""
    found = scope_where(engine, principal, scope)
    if found is None:
        return 0
    where, params = found
    with engine.reading() as db:
        row = db.execute(f"SELECT count(*) FROM atoms WHERE {where} AND created_at >= ?", (*params, since or 0))
        return int(row.fetchone()[0])


def export_rows(
    engine: AtomOps, principal: str, scope: str | None, since: int | None, chunk: int | None = None
) -> Generator[list[tuple[int, str, str]], None, None]:
    """Every entry of a scope at or after `since`, oldest first, from one snapshot, in chunks of
    `(created_at, atom_id, export line)`.

    Raises:
        Forbidden: a room one is not a member of.
    """
    found = scope_where(engine, principal, scope)
    if found is None:
        return
    where, params = found
    for rows in engine.stream(
        "SELECT created_at, atom_id, wire, superseded_by, metadata, external_ref FROM atoms "
        f"WHERE {where} AND created_at >= ? ORDER BY created_at, atom_id",
        (*params, since if since is not None else 0),
        chunk or engine.stream_rows,
    ):
        yield [(int(r[0]), str(r[1]), export_line(r[2], r[3], r[4], r[5])) for r in rows]


def rooms_of(engine: AtomOps, principal: str) -> list[dict[str, Any]]:
    """The rooms the principal belongs to, oldest first, each with its members (export's `room` lines)."""
    with engine.reading() as db:
        rooms = db.execute(
            "SELECT r.room_id, r.name, r.description, r.owner, r.created_at, r.archived FROM rooms r "
            "JOIN members m ON m.room_id = r.room_id WHERE m.principal = ? ORDER BY r.created_at, r.room_id",
            (principal,),
        ).fetchall()
        found = []
        for room_id, name, description, owner, created_at, archived in rooms:
            members = db.execute(
                "SELECT principal, role, scope, joined_at FROM members WHERE room_id = ? ORDER BY joined_at, principal",
                (room_id,),
            ).fetchall()
            found.append(
                {
                    "room_id": room_id,
                    "name": name,
                    "description": description,
                    "owner": owner,
                    "created_at": timefmt.to_iso(int(created_at)),
                    "archived": bool(archived),
                    "members": [
                        {"principal": p, "role": r, "scope": s, "joined_at": timefmt.to_iso(int(j))}
                        for p, r, s, j in members
                    ],
                }
            )
    return found


def _text(room: dict[str, Any], field: str, high: int, *, optional: bool = False) -> str | None:
    value = room.get(field)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not 1 <= len(value) <= high or "\x00" in value:
        raise ValidationError(f"room {field} must be 1 to {high} characters")
    return value


def _time(value: object, field: str) -> int:
    if not isinstance(value, str):
        raise ValidationError(f"room {field} must be a time")
    return timefmt.parse_iso(value, field=field)


class AtLine(ValidationError):
    """A refusal of a line found after it was read (at a batch's flush): it carries the line's number."""

    def __init__(self, number: int, message: str) -> None:
        super().__init__(message)
        self.number = number


class EngineImport:
    """One import onto an engine, inside the caller's write transaction (all of it or none).

    Ids are kept, so importing twice stores nothing new. Times are kept while each lands after the
    bucket's last instant (a bucket whose clock never ran; an incremental export on top of the one
    before); from the first that would not, the engine's clock assigns them (`max(now, last + 1)`):
    a kept older time would land behind readers' cursors and watermarks.

    Attributes:
        created, present, by_ref: entries stored, found by id, found by external_ref.
        differing: of the found by id, those whose stored content is not the line's (the stored one kept).
        kept, assigned: entries whose time was kept, or assigned by the engine's clock.
        future: of the assigned, those dated after now + `FUTURE_SKEW_US` (never kept).
        links_dropped: supersession links to entries that are not in the bucket (left out).
        rooms_created, rooms_present: room lines that made a room, or named one that exists.
    """

    def __init__(self, engine: AtomOps, principal: str, db: Any) -> None:
        self.engine = engine
        self.principal = principal
        self.db = db
        self.pending: list[tuple[int, int, KeptWrite, int, str | None]] = []  # line, time, write, bucket, metadata
        self.keep: dict[int, bool] = {}  # bucket -> its times are kept
        self.last: dict[int, int] = {}  # bucket -> the newest kept time
        self.buckets: dict[str, int] = {}
        self.created = self.present = self.by_ref = 0
        self.kept = self.assigned = self.future = self.links_dropped = 0
        self.differing = 0
        self.rooms_created = self.rooms_present = 0
        self.made: set[str] = set()  # rooms this import created

    # -- rooms ------------------------------------------------------------------------------
    def room(self, room: dict[str, Any]) -> None:
        """Create an exported room with its members unless a room of its id exists.

        Raises:
            ValidationError: a field out of bounds.
            Conflict: its owner already has another room of that name.
        """
        room_id = _text(room, "room_id", 40)
        assert room_id is not None
        if not ROOM_ID.match(room_id):
            raise ValidationError(f"{room_id!r} is not a room id")
        if self.db.execute("SELECT 1 FROM rooms WHERE room_id = ?", (room_id,)).fetchone():
            self.rooms_present += 1
            return
        name = _text(room, "name", 200)
        description = _text(room, "description", 2000, optional=True)
        owner = _text(room, "owner", 200, optional=True) or self.principal
        # Exported over an endpoint, which does not say its time or members: now, and the owner alone.
        at = room.get("created_at")
        created = timefmt.now_us() if at is None else _time(at, "created_at")
        members = room.get("members")
        if members is None:
            members = [
                {"principal": owner, "role": "owner", "scope": "read_write", "joined_at": timefmt.to_iso(created)}
            ]
        if not isinstance(members, list) or not all(isinstance(m, dict) for m in members):
            raise ValidationError("room members must be a list of objects")
        rows = []
        listed: set[str] = set()
        for member in members:
            who = _text(member, "principal", 200)
            assert who is not None
            if who in listed:  # one membership per principal: a second row would contradict the first
                raise ValidationError(f"room {room_id} lists member {who!r} twice")
            listed.add(who)
            if member.get("role") not in ("owner", "member") or member.get("scope") not in ("read", "read_write"):
                raise ValidationError("a member's role is owner or member, its scope read or read_write")
            rows.append((room_id, who, member["role"], member["scope"], _time(member.get("joined_at"), "joined_at")))
        if self.db.execute("SELECT 1 FROM rooms WHERE owner = ? AND name = ?", (owner, name)).fetchone():
            raise Conflict(
                f"{owner} already has another room named {name!r} here, and one owner's rooms have distinct names: "
                "nothing was imported (import into a store where it has none, or delete that room first)"
            )
        bucket = self.engine.create_bucket("room", room_id)
        self.db.execute(
            "INSERT INTO rooms(room_id, bucket, name, description, owner, created_at, archived) VALUES (?,?,?,?,?,?,?)",
            (room_id, bucket, name, description, owner, created, 1 if room.get("archived") else 0),
        )
        self.db.executemany("INSERT INTO members(room_id, principal, role, scope, joined_at) VALUES (?,?,?,?,?)", rows)
        self.rooms_created += 1
        self.made.add(room_id)

    # -- entries ----------------------------------------------------------------------------
    def add(self, number: int, created_at: int, write: KeptWrite) -> None:
        """Queue one entry of line `number` (oldest first within its scope), checked now so that a refusal
        names its line; a superseding one is written at once, after what came before it, so its
        predecessors are there to be superseded.

        Raises:
            ValidationError: a field out of bounds; AtLine: a queued line refused at the flush.
            Forbidden: a room the importer may not write to.
        """
        metadata = check_write(write)
        bucket = self._bucket(write.domain)
        if write.supersedes:
            self.flush()
            self.pending.append((number, created_at, write, bucket, metadata))
            self.flush()
            return
        self.pending.append((number, created_at, write, bucket, metadata))
        if len(self.pending) >= CHUNK:
            self.flush()

    def _bucket(self, domain: str) -> int:
        key = domain if room_of(domain) else ""
        bucket = self.buckets.get(key)
        if bucket is None:
            try:
                bucket = self.buckets[key] = self.engine.writable_bucket(self.principal, domain)
            except Forbidden as exc:
                if room_of(domain) in self.made:  # its members came from this very file: say who is missing
                    raise Forbidden(
                        f"cannot import into {domain}, a room this import creates: the importer ({self.principal}) "
                        "is not among its read_write members in the export (import as one of them: MNEMO_PRINCIPAL)"
                    ) from None
                raise Forbidden(f"cannot import into {domain}: {exc.message}") from None
            last = self.db.execute("SELECT last_created_at FROM buckets WHERE bucket = ?", (bucket,)).fetchone()
            self.keep[bucket] = True
            self.last[bucket] = int(last[0])
        return bucket

    def _links(self, bucket: int, write: KeptWrite) -> KeptWrite:
        """The write with only the predecessors that are live entries of its bucket (the others left out)."""
        named, values = self.engine.dialect.one_of("atom_id", list(write.supersedes))
        live = {
            r[0]
            for r in self.db.execute(
                f"SELECT atom_id FROM atoms WHERE {named} AND bucket = ? AND superseded_by IS NULL",
                (*values, bucket),
            )
        }
        kept = tuple(old for old in write.supersedes if old in live)
        if len(kept) == len(write.supersedes):
            return write
        self.links_dropped += len(write.supersedes) - len(kept)
        return write.replace(supersedes=kept)

    def flush(self) -> None:
        """Write what is queued (one batch of the engine's one insert path), leaving out ids already stored.

        Raises:
            AtLine: an id stored in another bucket than the one this import writes it to (named by its line).
        """
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        named, values = self.engine.dialect.one_of("atom_id", [w.atom_id for _, _, w, _, _ in batch])
        found = self.db.execute(f"SELECT atom_id, bucket, content FROM atoms WHERE {named}", values)
        stored = {r[0]: (int(r[1]), str(r[2])) for r in found}
        now = timefmt.now_us()
        rows: list[tuple[str, WriteRequest, int, str | None]] = []
        for number, created_at, write, bucket, metadata in batch:
            if write.atom_id in stored:
                there, content = stored[write.atom_id]
                if there != bucket:
                    # Ids are kept, so it cannot be stored twice; "already there" would be untrue here.
                    raise AtLine(
                        number,
                        f"entry {write.atom_id} is stored in another store or room of this backend than the one "
                        "this import writes it to (the importer's own store, or the room it names): import it as "
                        "its own principal (MNEMO_PRINCIPAL), or leave the line out",
                    )
                self.present += 1
                self.differing += content != write.content  # the stored one is kept: said, never silent
                continue
            stored[write.atom_id] = (bucket, write.content)  # a file that repeats a line stores it once
            if write.supersedes:
                write = self._links(bucket, write)
            # Kept while the clock would give that very time (`max(t, last + 1) == t`): after the bucket's last
            # instant, so behind no cursor or watermark, and not in the future (it would drag the clock along).
            # The first that is not ends keeping for the bucket.
            future = created_at > now + FUTURE_SKEW_US
            self.keep[bucket] = self.keep[bucket] and not future and created_at > self.last[bucket]
            if self.keep[bucket]:
                self.kept += 1
                self.last[bucket] = wanted = created_at
            else:
                self.assigned += 1
                self.future += future
                wanted = now
            rows.append((self.principal, write, wanted, metadata))
        results: list[WriteResult] = self.engine.insert_checked(self.db, rows) if rows else []
        for result in results:
            if result.created:
                self.created += 1
            else:
                self.by_ref += 1
