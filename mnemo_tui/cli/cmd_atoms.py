"""Provides the verbs of single entries: id prefixes resolved as git does, `show` and `delete`."""

from __future__ import annotations

import re
import sys
import uuid
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_tui import sanitize, timefmt
from mnemo_tui.catchup import refusals
from mnemo_tui.catchup.walk import Walk
from mnemo_tui.cli import output, terminal
from mnemo_tui.cli.commands import EntryFormat, Yes, ctx_of
from mnemo_tui.cli.table import key_value_table
from mnemo_tui.errors import Forbidden, NotFound, ValidationError
from mnemo_tui.limits import MAX_LIMIT, room_of
from mnemo_tui.values.model import Entry, RecentQuery

if TYPE_CHECKING:
    from mnemo_tui.backends import Backend
    from mnemo_tui.values.rooms import Room

MIN_PREFIX = 6
SHOWN_CANDIDATES = 5
# An endpoint has no prefix lookup: at most this many entries (own store, then each room) are walked.
WALK_BUDGET = 10_000
MAX_CHAIN = 100
HEADLINE_CELLS = 100
_PREFIX = re.compile(r"^[0-9a-f-]+\Z")


def first_line(entry: Entry) -> str:
    """The entry's first non-blank line, as one safe line of at most `HEADLINE_CELLS` (a whole page of
    text on one line would bury the message around it)."""
    return sanitize.clip(sanitize.line(entry.first_line), HEADLINE_CELLS)


def resolve_id(backend: Backend, value: str) -> str:
    """The full atom id `value` names: the id itself, or the one readable entry whose id starts with it.

    Raises:
        ValidationError: not an id nor a prefix of at least 6 hex characters; an ambiguous prefix
            (naming up to 5 candidates); on an endpoint, a prefix the newest 10,000 entries do not settle.
        NotFound: no readable entry's id starts with it.
    """
    wanted = value.strip().lower()
    try:
        if len(wanted.replace("-", "")) == 32:
            return str(uuid.UUID(wanted))
    except ValueError:
        pass
    if not _PREFIX.match(wanted) or len(wanted.replace("-", "")) < MIN_PREFIX:
        raise ValidationError(
            f"{sanitize.quoted(value)} is not an atom id, nor a prefix of one (at least {MIN_PREFIX} hex characters)"
        )
    found = backend.by_prefix(wanted)
    settled = True
    if found is None:
        found, settled = _walk_prefix(backend, wanted)
    if len(found) > 1:
        shown = "; ".join(f"{e.atom_id} {first_line(e)!s}".rstrip() for e in found[:SHOWN_CANDIDATES])
        more = " and more" if len(found) > SHOWN_CANDIDATES else ""
        raise ValidationError(f"the prefix {wanted} is ambiguous: {shown}{more}; give more characters")
    if not settled:
        raise ValidationError(
            f"the prefix {wanted} was not settled by the newest {WALK_BUDGET:,} entries of the endpoint "
            "(it has no prefix lookup); give the full atom id"
        )
    if not found:
        raise NotFound(f"no entry whose id starts with {wanted}")
    return found[0].atom_id


def _walk_prefix(backend: Backend, prefix: str) -> tuple[list[Entry], bool]:
    """Matches of `prefix` in the own store, then each joined room, newest first, within the budget.

    Returns the matches and whether every scope was walked to its end.
    """
    scopes: list[str | None] = [None, *(room.address for room in backend.rooms())]
    found: dict[str, Entry] = {}
    seen = 0
    for scope in scopes:
        walk = Walk(backend, RecentQuery(scope=scope, limit=MAX_LIMIT, include_history=True))
        for page in walk.pages():
            for entry in page:
                seen += 1
                if entry.atom_id.lower().startswith(prefix):
                    found.setdefault(entry.atom_id, entry)
            if len(found) > SHOWN_CANDIDATES:
                return list(found.values()), True
            if seen >= WALK_BUDGET and not walk.progress.done:
                return list(found.values()), False
    return list(found.values()), True


# -- show ---------------------------------------------------------------------------------------


def _links_chain(backend: Backend, entry: Entry) -> list[Entry]:
    """The chain followed by the entries' own links: `supersedes` back, `superseded_by` forward."""
    known: dict[str, Entry] = {entry.atom_id: entry}
    todo = [*entry.supersedes, *([entry.data["superseded_by"]] if entry.data.get("superseded_by") else [])]
    while todo and len(known) < MAX_CHAIN:
        atom = str(todo.pop())
        if atom in known:
            continue
        try:
            found = backend.get(atom)
        except NotFound:
            continue  # a deleted revision: the chain goes on without it
        known[atom] = found
        todo.extend(found.supersedes)
        after = found.data.get("superseded_by")
        if after:
            todo.append(after)
    return sorted(known.values(), key=lambda e: (e.created_at, e.atom_id))


def show(
    ctx: typer.Context,
    atom: Annotated[
        str, typer.Argument(metavar="ID", help="An atom id, or a unique prefix of at least 6 hex characters.")
    ],
    fmt: EntryFormat = "table",
) -> None:
    """Print one entry whole: content, provenance, concepts, metadata, scope, time and its revisions."""
    c = ctx_of(ctx)
    fmt = output.check_format(fmt)
    backend = c.backend
    atom = resolve_id(backend, atom)
    detail = backend.detail(atom)
    entry = detail.entry
    served = backend.chain(entry.atom_id)
    chain = served if served is not None else _links_chain(backend, entry)
    source = "server" if served is not None else "links"
    out = sys.stdout
    if fmt != "table":
        # One document (ndjson: the same, on its one line); the item and the revisions as stored.
        out.write(
            f'{{"item":{entry.wire},"metadata":{output.dumps(detail.metadata)},'
            f'"external_ref":{output.dumps(detail.external_ref)},'
            f'"chain":[{",".join(e.wire for e in chain)}],"chain_source":"{source}"}}\n'
        )
        return
    room = room_of(entry.domain)
    prov = entry.provenance
    rows = [
        ("atom_id", entry.atom_id),
        ("created_at", f"{timefmt.shown(entry.created_at, c.utc)} ({timefmt.to_iso(entry.created_at)})"),
        ("room" if room else "domain", entry.domain),
        ("author", entry.author),
        (
            "provenance",
            ", ".join(
                f"{k}={v if isinstance(v, str) else output.dumps(v)}" for k, v in sorted(prov.items()) if v is not None
            )
            or "-",
        ),
        ("concepts", ", ".join(entry.concepts) or "-"),
        ("metadata", output.dumps(detail.metadata) if detail.metadata else "-"),
        ("external_ref", detail.external_ref or "-"),
    ]
    if entry.supersedes:
        rows.append(("supersedes", ", ".join(entry.supersedes)))
    if entry.data.get("superseded_by"):
        rows.append(("superseded_by", str(entry.data["superseded_by"])))
    key_value_table(out, rows)
    out.write("\n" + sanitize.block(entry.content) + "\n")
    if len(chain) > 1:
        said = "from the server" if served is not None else "built from the supersedes / superseded_by links"
        out.write(f"\nchain ({len(chain)} revisions, oldest first; {said}):\n")
        for revision in chain:
            mark = "*" if revision.atom_id == entry.atom_id else " "
            when = timefmt.shown(revision.created_at, c.utc)
            out.write(f"{mark} {revision.atom_id}  {when}  {first_line(revision)}\n")


# -- delete -------------------------------------------------------------------------------------


def delete(
    ctx: typer.Context,
    atoms: Annotated[
        list[str], typer.Argument(metavar="ID...", help="Atom ids, or unique prefixes of at least 6 hex characters.")
    ],
    yes: Yes = False,
) -> None:
    """Delete your own entries, or room entries you wrote or whose room you own (asks on a terminal; elsewhere --yes).

    Deleting a revision makes the one it superseded the live entry again. Room entries are our
    extension: the hosted service keeps them (docs/cli.md).
    """
    c = ctx_of(ctx)
    backend = c.backend
    values = list(atoms)
    terminal.may_ask(yes, "mnemo delete")
    targets: list[Entry] = []
    rooms: list[Room] | None = None
    me = refusals.reader_principal(backend)
    for value in values:
        atom = resolve_id(backend, value)
        try:
            entry = backend.get(atom)
        except NotFound:
            # Not an entry one can read: a secret of one's vault is refused with its own message.
            if backend.delete(atom) == 0:
                raise NotFound(f"no entry {atom}") from None
            sys.stdout.write(f"deleted {atom}\n")
            continue
        if room_of(entry.domain) and rooms is None:
            rooms = backend.rooms()  # asked once, and only when a room entry is named
        refusal = refusals.delete_refusal(entry, rooms, me)
        if refusal is not None:
            raise Forbidden(refusal)
        if entry.atom_id not in {t.atom_id for t in targets}:
            targets.append(entry)
    # A room entry whose author only the endpoint can tell goes first: were it refused, nothing else has gone.
    owned = {r.room_id for r in rooms or [] if r.role == "owner"}
    targets.sort(key=lambda e: me is not None or room_of(e.domain) in (None, *owned))
    if not yes:
        for entry in targets:
            output.hint(f"  {entry.atom_id}  {first_line(entry)}")
        noun = "entry" if len(targets) == 1 else "entries"
        if not terminal.confirmed(f"Delete {len(targets)} {noun}?"):
            output.hint("nothing deleted")
            return
    for entry in targets:
        if refusals.delete_entry(backend, entry):
            revived = f" ({', '.join(entry.supersedes)} is the live entry again)" if entry.supersedes else ""
            sys.stdout.write(f"deleted {entry.atom_id}  {first_line(entry)}{sanitize.line(revived)}\n")
        else:
            output.hint(f"{entry.atom_id} was already gone")
