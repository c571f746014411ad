"""Provides `load`: an export (docs/export.md) put into any backend, so that importing it twice stores nothing new.

Onto an engine (the embedded store, PostgreSQL) it is one transaction: ids kept, times kept where
they land after the bucket's last instant (see `EngineImport`), rooms and members created. Over an endpoint each entry is one
write whose `external_ref` (its own, else `import:<original id>`) makes a repeat return the first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING

from mnemo_tui import portable
from mnemo_tui.backends import Backend
from mnemo_tui.engine.exchange import AtLine, EngineImport
from mnemo_tui.engine.rules import check_write
from mnemo_tui.errors import Forbidden, MnemoError, NotFound, ValidationError
from mnemo_tui.limits import NotJson, dumps, loads, room_of
from mnemo_tui.portable.export import engine_of
from mnemo_tui.values.model import Value
from mnemo_tui.values.writes import KeptWrite, WriteRequest

if TYPE_CHECKING:
    from typing import Any

# No export line comes near it (content <= 10,000 characters, metadata <= 64 KiB, each escaped at most
# 6-fold): a longer one is refused before it is read whole (docs/export.md).
MAX_LINE_BYTES = 1 << 20
IMPORT_PREFIX = "import:"  # the external_ref of an entry imported over an endpoint that had none


class Imported(Value):
    """What an import did (`mnemo import --format json` prints `wire()`)."""

    entries: int
    created: int
    present: int
    by_ref: int
    kept: int
    assigned: int
    future: int  # of the assigned: dated after now (+ a small skew), never kept
    differing: int  # of the already present by id: another content stored under that id (kept)
    links_dropped: int
    rooms_created: int
    rooms_present: int
    skipped_rooms: dict[str, int]

    def wire(self) -> dict[str, Any]:
        return {
            "entries": self.entries,
            "created": self.created,
            "already_present": self.present + self.by_ref,
            "skipped": sum(self.skipped_rooms.values()),
            "differing": self.differing,
            "times": {"kept": self.kept, "assigned": self.assigned, "future": self.future},
            "links_dropped": self.links_dropped,
            "rooms": {"created": self.rooms_created, "present": self.rooms_present},
            "skipped_rooms": [{"address": f"xroom:{r}", "entries": n} for r, n in sorted(self.skipped_rooms.items())],
        }


def read_line(source: IO[bytes], name: str, number: int) -> bytes:
    """One line, read at most `MAX_LINE_BYTES` at a time (a longer one is refused unread: memory stays flat)."""
    raw = source.readline(MAX_LINE_BYTES + 1)
    if len(raw) > MAX_LINE_BYTES:
        raise ValidationError(
            f"{name} line {number} is longer than {MAX_LINE_BYTES:,} bytes, which no export line is (refused unread)"
        )
    return raw


def _parsed(raw: bytes, name: str, number: int) -> Any:
    try:
        item = loads(raw)
    except UnicodeDecodeError:
        raise ValidationError(f"{name} line {number} is not UTF-8 text") from None
    except NotJson as exc:
        raise ValidationError(f"{name} line {number} is not JSON a store can keep: {exc}") from None
    except ValueError:
        if not raw.endswith(b"\n"):
            raise ValidationError(
                f"{name} ends in the middle of line {number}: the export was cut short (export it again)"
            ) from None
        raise ValidationError(f"{name} line {number} is not JSON") from None
    if b"\\ud" in raw or b"\\uD" in raw:
        try:  # an escaped lone surrogate (`"\\ud800"`) parses, but is no character: the store cannot keep it
            dumps(item).encode()
        except UnicodeEncodeError:
            raise ValidationError(
                f"{name} line {number} holds a lone surrogate escape (\\ud800-\\udfff): not text"
            ) from None
    return item


def _lines(source: IO[bytes], name: str) -> Iterator[tuple[int, str, Any]]:
    """The lines after the header as (number, kind, object). An end line may be followed by another
    export (a full one and its incrementals, concatenated): its header is checked and reading goes on.

    Raises:
        ValidationError: a bad line, content after an end line that is not a header, a file cut short.
    """
    number = 1
    ended = False
    while True:
        number += 1
        raw = read_line(source, name, number)
        if not raw:
            break
        if not raw.strip():
            continue
        if ended:
            try:
                item = _parsed(raw, name, number)
            except ValidationError:
                item = None
            if not isinstance(item, dict) or portable.HEADER_KEY not in item:
                raise ValidationError(
                    f"{name} line {number}: content after the end line that is not the header of another export"
                )
            portable.check_header(raw, f"{name} line {number}")
            ended = False
            continue
        item = _parsed(raw, name, number)
        if not isinstance(item, dict):
            raise ValidationError(f"{name} line {number} is not a JSON object")
        if "atom_id" in item:
            yield number, "entry", item
        elif set(item) == {"room"} and isinstance(item["room"], dict):
            yield number, "room", item["room"]
        elif set(item) == {"end"}:
            yield number, "end", item["end"]
            ended = True
        else:
            raise ValidationError(f"{name} line {number} is neither an entry, a room nor the end line")
    if not ended:
        raise ValidationError(
            f"{name} ends at line {number - 1} without its end line: the export was cut short (export it again)"
        )


def _at(name: str, number: int, exc: MnemoError) -> MnemoError:
    """The error with the line it came from (the same kind, so the same exit code)."""
    if isinstance(exc, AtLine):  # found at a flush: the line it names, not the one being read
        return ValidationError(f"{name} line {exc.number}: {exc.message}")
    if isinstance(exc, ValidationError):
        return ValidationError(f"{name} line {number}: {exc}")
    return exc


def load(backend: Backend, source: IO[bytes], name: str, progress: Callable[[int], None] | None = None) -> Imported:
    """Import the export read from `source` (`name` says where it came from, for messages).

    Raises:
        ValidationError: not an export, another format version, a bad line (named), a file cut short.
        Forbidden: writing into a room one may not write to, onto an engine.
    """
    first = read_line(source, name, 1)
    portable.check_header(first, name)
    engine = engine_of(backend)
    if engine is not None:
        with engine.transaction() as db:  # all of it or none: a failed import leaves the store as it was
            job = EngineImport(engine, backend.principal, db)
            count = 0
            for number, kind, item in _lines(source, name):
                try:
                    if kind == "room":
                        job.room(item)
                    elif kind == "entry":
                        created_at, write, _later = portable.entry_of(item)
                        job.add(number, created_at, write)
                        count += 1
                        if progress is not None:
                            progress(count)
                except MnemoError as exc:
                    raise _at(name, number, exc) from None
            try:
                job.flush()
            except MnemoError as exc:
                raise _at(name, number, exc) from None
        return Imported(
            entries=count,
            created=job.created,
            present=job.present,
            by_ref=job.by_ref,
            kept=job.kept,
            assigned=job.assigned,
            future=job.future,
            differing=job.differing,
            links_dropped=job.links_dropped,
            rooms_created=job.rooms_created,
            rooms_present=job.rooms_present,
            skipped_rooms={},
        )
    return _over_endpoint(backend, source, name, progress)


class _Tee:
    """A source whose lines read are also written to a spool, to be read again."""

    def __init__(self, source: IO[bytes], spool: IO[bytes]) -> None:
        self.source, self.spool = source, spool

    def readline(self, size: int = -1) -> bytes:
        line = self.source.readline(size)
        self.spool.write(line)
        return line


def _check_into(source: IO[bytes], spool: IO[bytes], name: str) -> None:
    """Read and check each line after the header as an engine checks it (JSON, shape, the engine's bounds),
    copying it to `spool`: over an endpoint, where each entry is its own write, a refused file stores nothing.

    Raises:
        ValidationError: a bad line (named), a file cut short.
    """
    # `_lines` reads only `readline`, which the tee has.
    for number, kind, item in _lines(_Tee(source, spool), name):  # type: ignore[arg-type]
        if kind == "entry":
            try:
                check_write(portable.entry_of(item)[1])
            except ValidationError as exc:
                raise _at(name, number, exc) from None


def _over_endpoint(backend: Backend, source: IO[bytes], name: str, progress: Callable[[int], None] | None) -> Imported:
    """One write per entry, times assigned by the endpoint; rooms are never created here. The whole file is
    checked before the first write, spooled to a temporary file (memory stays flat) and read again."""
    import tempfile  # an import over an endpoint only

    with tempfile.TemporaryFile() as spool:
        _check_into(source, spool, name)
        spool.seek(0)
        return _write_each(backend, spool, name, progress)


def _write_each(backend: Backend, source: IO[bytes], name: str, progress: Callable[[int], None] | None) -> Imported:
    """The writes of an import over an endpoint, from a file already checked."""
    writable = {r.room_id for r in backend.rooms() if r.scope == "read_write"}
    skipped: dict[str, int] = {}
    new_ids: dict[str, str] = {}  # original id -> id here, of entries a later one supersedes
    count = created = present = dropped = 0
    for number, kind, item in _lines(source, name):
        if kind != "entry":
            continue
        try:
            _created_at, kept, later = portable.entry_of(item)
            count += 1
            room = room_of(kept.domain)
            if room is not None and room not in writable:
                skipped[room] = skipped.get(room, 0) + 1
                continue
            if _visible(backend, kept.atom_id):  # an export of this very endpoint: its entries are here
                present += 1
                if later is not None:
                    new_ids[kept.atom_id] = kept.atom_id
                if progress is not None:
                    progress(count)
                continue
            result = backend.write(_remote_write(kept, new_ids))
        except MnemoError as exc:
            raise _at(name, number, exc) from None
        dropped += len(kept.supersedes) - sum(1 for old in kept.supersedes if old in new_ids)
        if later is not None:
            new_ids[kept.atom_id] = result.atom_id
        created += result.created
        present += not result.created
        if progress is not None:
            progress(count)
    return Imported(
        entries=count,
        created=created,
        present=present,
        by_ref=0,
        kept=0,
        assigned=created,
        future=0,
        differing=0,
        links_dropped=dropped,
        rooms_created=0,
        rooms_present=0,
        skipped_rooms=skipped,
    )


def _visible(backend: Backend, atom_id: str) -> bool:
    """The entry of that id is readable here (one GET): importing it would store it a second time."""
    try:
        backend.get(atom_id)
    except (NotFound, Forbidden):
        return False
    return True


def _remote_write(kept: KeptWrite, new_ids: dict[str, str]) -> WriteRequest:
    return WriteRequest(
        kept.content,
        domain=kept.domain,
        concepts=kept.concepts,
        metadata=kept.metadata,
        external_ref=kept.external_ref or IMPORT_PREFIX + kept.atom_id,
        supersedes=tuple(new_ids[old] for old in kept.supersedes if old in new_ids),
        agent=kept.agent,
        agent_name=kept.agent_name,
        client_env=kept.client_env,
    )
