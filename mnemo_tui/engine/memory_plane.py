"""Provides the embedded store's memory plane beyond single entries: stats, feedback, batches, chains, the
concept graph, export, domain wipes and reset, invites listed, and remembered idempotent answers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mnemo_tui import timefmt
from mnemo_tui.engine.atoms import AtomOps
from mnemo_tui.engine.base import Database
from mnemo_tui.engine.exchange import export_line
from mnemo_tui.engine.rules import (
    FINITE_OUTCOME,
    check_outcome,
    check_read,
    check_write,
    spliced_entry,
    with_superseded_by,
)
from mnemo_tui.errors import MnemoError, NotFound, Unprocessable
from mnemo_tui.limits import room_of
from mnemo_tui.values.model import Entry

if TYPE_CHECKING:
    from typing import Any

    from mnemo_tui.values.plane import Chain, DomainWipe, Graph, GraphEdge, Stats
    from mnemo_tui.values.rooms import InviteInfo
    from mnemo_tui.values.writes import WriteRequest, WriteResult

CHAIN_MAX = 200  # revisions one chain answer may resolve
GRAPH_SCAN = 5000  # atoms one graph hop may read
GRAPH_PAIRS = 200_000  # (concept, frontier concept) pairs one graph hop may weigh (then 422)
IDEMPOTENT_US = 24 * 3600 * 1_000_000  # how long a remembered answer is kept


@contextmanager
def _savepoint(db: Any) -> Iterator[None]:
    """A part of a write transaction undone alone when it raises (SQL both engines speak)."""
    db.execute("SAVEPOINT batch_part")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK TO SAVEPOINT batch_part")
        db.execute("RELEASE SAVEPOINT batch_part")
        raise
    db.execute("RELEASE SAVEPOINT batch_part")


class MemoryOps(AtomOps, Database):
    """The operations of the hosted memory plane that are not the feed, search or a single entry."""

    # -- stats and feedback ---------------------------------------------------------------
    def stats(self, principal: str) -> Stats:
        """Counts of the principal's own store (rooms are not counted)."""
        from mnemo_tui.values.plane import Stats

        with self.reading() as db:
            bucket = self.own_bucket(principal)
            if bucket is None:
                return Stats(0, [], 0, 0.0, 0)
            total = int(db.execute("SELECT count(*) FROM atoms WHERE bucket = ?", (bucket,)).fetchone()[0])
            domains = [
                r[0]
                for r in db.execute("SELECT DISTINCT domain FROM atoms WHERE bucket = ? ORDER BY domain", (bucket,))
            ]
            edges = int(
                db.execute(
                    f"SELECT count(*) FROM (SELECT DISTINCT c1.value, c2.value FROM atoms a, {self.dialect.each_concept('c1')},"
                    f" {self.dialect.each_concept('c2')} WHERE a.bucket = ? AND a.superseded_by IS NULL AND c1.value < c2.value) AS pairs",
                    (bucket,),
                ).fetchone()[0]
            )
            row = db.execute(
                "SELECT count(*), avg(v) FROM (SELECT avg(outcome) AS v FROM feedback WHERE bucket = ? AND"
                f" {FINITE_OUTCOME} GROUP BY atom_id) AS per_atom",
                (bucket,),
            ).fetchone()
            prints = int(
                db.execute(
                    "SELECT count(DISTINCT fingerprint) FROM atoms WHERE bucket = ? AND fingerprint IS NOT NULL",
                    (bucket,),
                ).fetchone()[0]
            )
        return Stats(total, domains, edges, round(float(row[1] or 0.0), 6), int(row[0]), prints)

    def count_atoms(self, principal: str, domain: str | None) -> int:
        """How many entries one own domain (or the whole own store, history included) holds."""
        check_read(("domain", domain))
        with self.reading() as db:
            bucket = self.own_bucket(principal)
            if domain is None:
                row = db.execute("SELECT count(*) FROM atoms WHERE bucket = ?", (bucket,)).fetchone()
            else:
                row = db.execute(
                    "SELECT count(*) FROM atoms WHERE bucket = ? AND domain = ?", (bucket, domain)
                ).fetchone()
        return int(row[0])

    def feedback(self, principal: str, atom_ids: list[str], outcome: float) -> tuple[int, float]:
        """Record `outcome` (-1..1) for each of the principal's own atoms named; returns (how many were
        recorded, the mean valence of those atoms after it). Unknown or foreign ids are not counted.

        Raises:
            Unprocessable: an outcome that is not a finite number from -1 to 1 (`rules.check_outcome`).
        """
        outcome = check_outcome(outcome)
        now = timefmt.now_us()
        with self.transaction() as db:
            bucket = self.own_bucket(principal)
            if bucket is None or not atom_ids:
                return 0, 0.0
            wanted = sorted(set(atom_ids))
            named, values = self.dialect.one_of("atom_id", wanted)
            found = [
                r[0] for r in db.execute(f"SELECT atom_id FROM atoms WHERE bucket = ? AND {named}", (bucket, *values))
            ]
            db.executemany(
                "INSERT INTO feedback(atom_id, bucket, outcome, at) VALUES (?,?,?,?)",
                [(a, bucket, outcome, now) for a in found],
            )
            if not found:
                return 0, 0.0
            named, values = self.dialect.one_of("atom_id", found)
            mean = db.execute(
                f"SELECT avg(v) FROM (SELECT avg(outcome) AS v FROM feedback WHERE {named} AND {FINITE_OUTCOME} "
                "GROUP BY atom_id) AS per_atom",
                values,
            ).fetchone()[0]
        return len(found), round(float(mean or 0.0), 6)

    def valences(self, atom_ids: list[str]) -> dict[str, float]:
        """The mean reported outcome of each id that has feedback (callers pass only readable ids)."""
        if not atom_ids:
            return {}
        named, values = self.dialect.one_of("atom_id", atom_ids)
        with self.reading() as db:
            rows = db.execute(
                f"SELECT atom_id, avg(outcome) FROM feedback WHERE {named} AND {FINITE_OUTCOME} GROUP BY atom_id",
                values,
            ).fetchall()
        return {r[0]: float(r[1]) for r in rows}

    # -- batches ---------------------------------------------------------------------------
    def write_batch(self, principal: str, reqs: list[WriteRequest]) -> list[WriteResult | MnemoError]:
        """Store each request through the one insert path, in one transaction: every valid item at once; when
        that is refused (a room one cannot write), item by item, each in a savepoint, so each gets its own answer."""
        with self.transaction() as db:
            return self._batch_in(db, principal, reqs)

    def write_batch_once(
        self,
        principal: str,
        key: str,
        reqs: list[WriteRequest],
        answer: Callable[[list[WriteResult | MnemoError]], str],
    ) -> str:
        """`write_batch` under an idempotency key of the principal's: the key is claimed, the batch written and
        its answer (`answer(results)`) kept in one transaction, so of concurrent requests with one key exactly
        one writes and the others wait for it and return its answer, byte for byte (24 hours)."""
        now = timefmt.now_us()
        with self.transaction() as db:
            db.execute("DELETE FROM idempotency WHERE at <= ?", (now - IDEMPOTENT_US,))
            # The claim: a second transaction with the key waits here (the row's lock, or SQLite's write lock)
            # until the first ends, then finds the key taken and reads the answer the first committed.
            claimed = db.execute(
                "INSERT INTO idempotency(principal, key, answer, at) VALUES (?,?,'',?) "
                "ON CONFLICT (principal, key) DO NOTHING",
                (principal, key, now),
            ).rowcount
            if claimed != 1:
                row = db.execute(
                    "SELECT answer FROM idempotency WHERE principal = ? AND key = ?", (principal, key)
                ).fetchone()
                return str(row[0])
            text = answer(self._batch_in(db, principal, reqs))
            db.execute("UPDATE idempotency SET answer = ? WHERE principal = ? AND key = ?", (text, principal, key))
        return text

    def _batch_in(self, db: Any, principal: str, reqs: list[WriteRequest]) -> list[WriteResult | MnemoError]:
        results: list[WriteResult | MnemoError | None] = [None] * len(reqs)
        valid: list[tuple[int, str | None]] = []
        for i, req in enumerate(reqs):
            try:
                valid.append((i, check_write(req)))
            except MnemoError as exc:
                results[i] = exc
        now = timefmt.now_us()
        try:
            with _savepoint(db):
                written = self.insert_checked(db, [(principal, reqs[i], now, meta) for i, meta in valid])
        except MnemoError:
            for i, meta in valid:
                try:
                    with _savepoint(db):
                        results[i] = self.insert_checked(db, [(principal, reqs[i], now, meta)])[0]
                except MnemoError as exc:
                    results[i] = exc
        else:
            for (i, _), result in zip(valid, written, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def remembered(self, principal: str, key: str) -> str | None:
        """The answer remembered for an `Idempotency-Key` of the principal's (24 hours)."""
        with self.reading() as db:
            row = db.execute(
                "SELECT answer FROM idempotency WHERE principal = ? AND key = ? AND at > ?",
                (principal, key, timefmt.now_us() - IDEMPOTENT_US),
            ).fetchone()
        return None if row is None else str(row[0])

    # -- single atoms by other handles ------------------------------------------------------
    def by_external_ref(self, principal: str, external_ref: str) -> str:
        """The id of the principal's own atom written with `external_ref`.

        Raises:
            NotFound: no such atom.
        """
        check_read(("external_ref", external_ref))
        if "\x00" in external_ref:  # no ref is stored with one (refuse_nul): on every engine, nothing found
            raise NotFound("no entry with that external_ref")
        with self.reading() as db:
            bucket = self.own_bucket(principal)
            row = db.execute(
                "SELECT atom_id FROM atoms WHERE bucket = ? AND external_ref = ?", (bucket, external_ref)
            ).fetchone()
        if row is None:
            raise NotFound("no entry with that external_ref")
        return str(row[0])

    def chain(self, principal: str, atom: str) -> Chain:
        """Every revision reachable from `atom` by supersession, both ways, oldest first.

        Raises:
            NotFound: an unknown or unreadable starting atom.
        """
        from mnemo_tui.values.plane import Chain, Revision

        self.get(principal, atom)
        with self.reading() as db:
            # The atom's own bucket, which `get` found readable: one's own store or a room (not always one's own).
            row = db.execute("SELECT bucket FROM atoms WHERE atom_id = ?", (atom,)).fetchone()
            if row is None:
                raise NotFound(f"no entry {atom}")
            bucket = int(row[0])
            seen: dict[str, tuple[int, str, str | None, list[str]]] = {}
            dangling: list[str] = []
            todo = [atom]
            truncated = False
            while todo:
                current = todo.pop()
                if current in seen or current in dangling:
                    continue
                if len(seen) + len(dangling) >= CHAIN_MAX:
                    truncated = True
                    break
                row = db.execute(
                    "SELECT created_at, wire, superseded_by, supersedes FROM atoms WHERE atom_id = ? AND bucket = ?",
                    (current, bucket),
                ).fetchone()
                if row is None:
                    dangling.append(current)
                    continue
                before = json.loads(row[3] or "[]")
                seen[current] = (int(row[0]), str(row[1]), row[2], before)
                todo += [*before, *([row[2]] if row[2] else [])]
        revisions = [
            Revision(Entry(v[0], a, with_superseded_by(v[1], v[2])), is_head=v[2] is None)
            for a, v in sorted(seen.items(), key=lambda kv: (kv[1][0], kv[0]))
        ]
        return Chain(atom_id=atom, revisions=revisions, dangling=sorted(dangling), truncated=truncated)

    def by_fingerprint(self, principal: str, scope: str | None, fingerprint: str) -> list[Entry]:
        """The live entries of a scope written with exactly this fingerprint, newest first (at most 10).

        Raises:
            Forbidden: a room one is not a member of.
        """
        check_read(("scope", scope), ("fingerprint", fingerprint))
        room_id = room_of(scope)
        if "\x00" in fingerprint:  # none is stored with one (refuse_nul): on every engine, nothing found
            return []
        with self.reading() as db:
            bucket = self.room_bucket(principal, room_id) if room_id is not None else self.own_bucket(principal)
            sql = (
                "SELECT created_at, atom_id, wire, superseded_by FROM atoms WHERE bucket = ? AND fingerprint = ?"
                " AND superseded_by IS NULL"
            )
            params: list[object] = [bucket, fingerprint]
            if scope is not None and room_id is None:
                sql += " AND domain = ?"
                params.append(scope)
            rows = db.execute(sql + " ORDER BY created_at DESC LIMIT 10", params).fetchall()
        return [spliced_entry(r) for r in rows]

    # -- the concept graph ----------------------------------------------------------------
    def graph(
        self, principal: str, seeds: list[str], *, depth: int, domain: str | None, min_weight: float, limit: int
    ) -> Graph:
        """The concepts around `seeds`: two concepts are joined when live atoms of the scope carry both.

        An edge's `count` is how many atoms carry both, its `weight` that count over the atoms carrying
        either (Jaccard, 0..1), its `valence` the mean feedback of those atoms, `updated_at` the newest.
        Each hop follows the edges of the concepts found by the hop before, up to `depth` hops.
        """
        from mnemo_tui.values.plane import Graph, GraphEdge

        check_read(("domain", domain), *((f"seeds.{n}", seed) for n, seed in enumerate(seeds)))
        room_id = room_of(domain)
        with self.reading() as db:
            bucket = self.room_bucket(principal, room_id) if room_id is not None else self.own_bucket(principal)
            if bucket is None:
                return Graph([], False, min_weight)
            where = "a.bucket = ? AND a.superseded_by IS NULL"
            base: list[object] = [bucket]
            if domain is not None and room_id is None:
                where += " AND a.domain = ?"
                base.append(domain)
            frontier = sorted({s for s in seeds if "\x00" not in s})  # no concept holds a NUL (refuse_nul)
            visited: set[str] = set()
            edges: dict[tuple[str, str], GraphEdge] = {}
            truncated = False
            for _ in range(depth):
                frontier = [c for c in frontier if c not in visited]
                if not frontier:
                    break
                visited.update(frontier)
                named, values = self.dialect.one_of("c.value", frontier)
                rows = db.execute(
                    f"SELECT DISTINCT a.atom_id, a.concepts, a.created_at FROM atoms a, {self.dialect.each_concept('c')} "
                    f"WHERE {where} AND {named} LIMIT ?",
                    (*base, *values, GRAPH_SCAN + 1),
                ).fetchall()
                if len(rows) > GRAPH_SCAN:
                    truncated, rows = True, rows[:GRAPH_SCAN]
                pairs: dict[tuple[str, str], list[tuple[str, int]]] = {}
                wanted = set(frontier)
                steps = 0
                for atom_id, concepts, created in rows:
                    self.check_time()
                    carried = set(json.loads(concepts))
                    near = carried & wanted
                    # Only pairs with a concept of the frontier: |names| x |near| steps, not |names|^2.
                    steps += len(carried) * len(near)
                    if steps > GRAPH_PAIRS:
                        raise Unprocessable(
                            f"the graph would weigh more than {GRAPH_PAIRS:,} pairs of concepts in one hop "
                            "(GRAPH_PAIRS); ask for fewer hops (depth) or rarer seeds",
                            details={"limit_pairs": GRAPH_PAIRS},
                        )
                    found_here: set[tuple[str, str]] = set()
                    for a in near:
                        for b in carried:
                            if a != b:
                                found_here.add((a, b) if a < b else (b, a))
                    for pair in found_here:
                        pairs.setdefault(pair, []).append((atom_id, int(created)))
                names = sorted({n for pair in pairs for n in pair})
                carrying = self._carrying(where, base, names) if names else {}
                valence = self.valences(sorted({a for atoms in pairs.values() for a, _ in atoms}))
                found: set[str] = set()
                for n, ((a, b), atoms) in enumerate(pairs.items()):
                    if n % 4096 == 0:
                        self.check_time()
                    if (a, b) in edges:
                        continue
                    count = len(atoms)
                    either = carrying.get(a, count) + carrying.get(b, count) - count
                    weight = round(count / either, 6) if either > 0 else 1.0
                    if weight < min_weight:
                        continue
                    marks_v = [valence[x] for x, _ in atoms if x in valence]
                    edges[(a, b)] = GraphEdge(
                        a,
                        b,
                        weight,
                        round(sum(marks_v) / len(marks_v), 6) if marks_v else 0.0,
                        count,
                        max(t for _, t in atoms),
                    )
                    found.update((a, b))
                frontier = sorted(found)
        ordered = sorted(edges.values(), key=lambda e: (-e.weight, -e.count, e.source, e.target))
        if len(ordered) > limit:
            truncated, ordered = True, ordered[:limit]
        return Graph(ordered, truncated, min_weight)

    def _carrying(self, where: str, base: list[object], names: list[str]) -> dict[str, int]:
        """How many atoms of the scope carry each concept."""
        named, values = self.dialect.one_of("c.value", names)
        rows = self.db.execute(
            f"SELECT c.value, count(DISTINCT a.atom_id) FROM atoms a, {self.dialect.each_concept('c')} "
            f"WHERE {where} AND {named} GROUP BY c.value",
            (*base, *values),
        ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    # -- export, wipes and reset --------------------------------------------------------------
    def export(self, principal: str, chunk: int | None = None) -> Iterator[list[str]]:
        """Every entry of the principal's own store, oldest first, history included, each its wire item
        with its metadata and external_ref: JSON lines' worth. The vault is a table of its own: never in it."""
        with self.reading():
            bucket = self.own_bucket(principal)
        for rows in self.stream(
            "SELECT wire, superseded_by, metadata, external_ref FROM atoms WHERE bucket = ? ORDER BY created_at, atom_id",
            (-1 if bucket is None else bucket,),
            chunk or self.stream_rows,
        ):
            yield [export_line(*row) for row in rows]

    def delete_domain(self, principal: str, domain: str) -> DomainWipe:
        """Delete every entry of one own domain through the one delete path. Vault secrets are never in a
        domain here; the caller's count of them is reported as skipped (kept)."""
        from mnemo_tui.values.plane import DomainWipe

        check_read(("domain", domain))
        with self.transaction() as db:
            bucket = self.own_bucket(principal)
            secrets = int(db.execute("SELECT count(*) FROM vault WHERE principal = ?", (principal,)).fetchone()[0])
            if bucket is None:
                return DomainWipe(0, secrets, 0)
            rows = db.execute(
                "SELECT atom_id, supersedes FROM atoms WHERE bucket = ? AND domain = ?", (bucket, domain)
            ).fetchall()
            inside = {r[0] for r in rows}
            hidden = sum(1 for _, before in rows for old in json.loads(before or "[]") if old not in inside)
            deleted = self.delete_set(db, bucket, domain, reason="domain_wiped")
        return DomainWipe(deleted, secrets, hidden)

    def reset(self, principal: str) -> int:
        """Delete every entry of the principal's own store (not its rooms, keys or vault); returns how many."""
        with self.transaction() as db:
            bucket = self.own_bucket(principal)
            if bucket is None:
                return 0
            deleted = self.delete_set(db, bucket, reason="reset")
            db.execute("DELETE FROM feedback WHERE bucket = ?", (bucket,))
        return deleted

    # -- invites ---------------------------------------------------------------------------
    def list_invites(self, principal: str, room_id: str) -> list[InviteInfo]:
        """A room's invites, newest first, for its owner only; never a code or its hash.

        Raises:
            Forbidden: not the owner, not a member, or no such room.
        """
        from mnemo_tui.values.rooms import InviteInfo

        with self.reading() as db:
            self.require_owner(principal, room_id, "list its invites")
            rows = db.execute(
                "SELECT invite_id, scope, max_uses, uses, expires_at, created_at FROM invites WHERE room_id = ? "
                "ORDER BY created_at DESC, invite_id DESC",
                (room_id,),
            ).fetchall()
        return [InviteInfo(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in rows]
