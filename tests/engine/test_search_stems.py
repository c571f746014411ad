"""Search finds what a person means, on both engines: stems, folded accents, concepts, phrases; the store's
language; and the reindex that brings an older store there, in resumable batches."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mnemo_tui.engine import fts
from mnemo_tui.engine.sqlite import schema
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import ValidationError
from mnemo_tui.sqlitefile import immediate
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.targets import Target


def found(store: Any, query: str, principal: str = "alice", **options: Any) -> list[str]:
    return sorted(h.entry.content for h in store.search(principal, SearchQuery(query=query, top_k=500, **options)))


DEPLOY = "The API deploys on Cloudflare Workers"


@pytest.mark.parametrize(
    ("query", "hit"),
    [
        ("deploy", True),  # docs/mcp.md's example: the stem of `deploys`
        ("deployed", True),
        ("DEPLOYING", True),
        ("worker", True),
        ("cloudflare workers", True),
        ("zebra", False),
    ],
)
def test_a_word_finds_every_form_of_its_stem(target: Target, query: str, hit: bool) -> None:
    store = target.open()
    try:
        store.write("alice", WriteRequest(DEPLOY, concepts=("deploy",), domain="ops"))
        assert found(store, query) == ([DEPLOY] if hit else [])
    finally:
        store.close()


def test_concepts_are_searched_beside_the_content(target: Target) -> None:
    store = target.open()
    try:
        store.write("alice", WriteRequest("Rolled back api-gateway 1.4.2: p99 doubled", concepts=("incident",)))
        store.write("alice", WriteRequest("Lunch is at noon", concepts=("kitchen-sink",)))
        assert found(store, "incidents") == ["Rolled back api-gateway 1.4.2: p99 doubled"]
        assert found(store, "roll back") == ["Rolled back api-gateway 1.4.2: p99 doubled"]
        assert found(store, "kitchen-sink") == ["Lunch is at noon"]
        # A phrase never runs from the content into the concepts.
        assert found(store, "noon-kitchen") == []
    finally:
        store.close()


def test_a_word_with_punctuation_is_a_phrase_of_its_tokens(target: Target) -> None:
    store = target.open()
    try:
        store.write("alice", WriteRequest("the build-bot restarted"))
        assert found(store, "build-bot") == ["the build-bot restarted"]
        assert found(store, "builds-bots") == ["the build-bot restarted"]  # each token stemmed
        assert found(store, "bot-build") == []
    finally:
        store.close()


def test_case_and_accents_are_folded_alike_on_entries_and_queries(target: Target) -> None:
    store = target.open()
    try:
        store.write("alice", WriteRequest("Café crème at the Straße"))
        assert found(store, "cafe") == ["Café crème at the Straße"]
        assert found(store, "CAFÉ") == ["Café crème at the Straße"]
        assert found(store, "strasse") == ["Café crème at the Straße"]
    finally:
        store.close()


def test_marks_beyond_latin_letters_are_kept(target: Target) -> None:
    store = target.open()
    try:
        store.write("alice", WriteRequest("がっこう へ いく"))
        store.write("alice", WriteRequest("Май и мой"))
        assert found(store, "がっこう") == ["がっこう へ いく"]
        assert found(store, "かっこう") == []  # the dakuten makes another word
        assert found(store, "май") == ["Май и мой"]
        assert found(store, "маи") == []
    finally:
        store.close()


def test_a_deleted_entry_leaves_the_index_with_its_concepts(target: Target) -> None:
    store = target.open()
    try:
        first = store.write("alice", WriteRequest("deploys went out", concepts=("release",), domain="ops"))
        store.write("alice", WriteRequest("a second release", domain="ops"))
        assert store.delete("alice", first.atom_id) == 1
        assert found(store, "release") == ["a second release"]
        assert found(store, "deploy") == []
        store.write("alice", WriteRequest("deploys went out", concepts=("release",), domain="ops"))
        assert found(store, "release") == ["a second release", "deploys went out"]
    finally:
        store.close()


def test_the_store_language_is_english_unless_changed_and_a_change_is_a_reindex(target: Target) -> None:
    store = target.open()
    try:
        assert store.language == "english"
        store.write("alice", WriteRequest("Die Häuser sind alt", concepts=("Wohnungen",)))
        assert found(store, "haus") == []  # English stems `häuser` as `hauser`
        with pytest.raises(ValidationError, match="no stemmer"):
            store.reindex_search("klingon")
        assert store.language == "english"
        assert store.reindex_search("german") == 1
        assert store.language == "german"
        assert found(store, "Haus") == ["Die Häuser sind alt"]
        assert found(store, "Wohnung") == ["Die Häuser sind alt"]
        store.write("alice", WriteRequest("Ein Haus am See"))  # new writes stem in the store's language
        assert found(store, "Hauses") == ["Die Häuser sind alt", "Ein Haus am See"]
    finally:
        store.close()
    reopened = target.open()
    try:
        assert reopened.language == "german"
        assert found(reopened, "häusern") == ["Die Häuser sind alt", "Ein Haus am See"]
    finally:
        reopened.close()


# -- an older embedded store ------------------------------------------------------------------------


OLD_ENTRIES = [(f"entry {i} deploys the service", ("rollout",) if i % 2 else ()) for i in range(23)]


def older_store(path: Path) -> None:
    """A store at schema 6 (the last before stems), its entries indexed by that day's rule, as it left them."""
    db = sqlite3.connect(path, isolation_level=None)
    for number, _name, fn in schema.MIGRATIONS:
        if number > 6:
            break
        with immediate(db):
            fn(db)
            db.execute(f"PRAGMA user_version = {number}")
    with immediate(db):
        db.execute("INSERT INTO buckets(kind, owner) VALUES ('own', 'alice')")
        for i, (content, concepts) in enumerate(OLD_ENTRIES):
            atom = f"00000000-0000-4000-8000-{i:012d}"
            cur = db.execute(
                "INSERT INTO atoms(atom_id, bucket, domain, created_at, content, concepts, principal, wire) "
                "VALUES (?, 1, 'general', ?, ?, ?, 'alice', ?)",
                (atom, 1000 + i, content, str(list(concepts)).replace("'", '"'), f'{{"atom_id":"{atom}"}}'),
            )
            # That day's index: unstemmed content tokens, no concepts.
            body = " ".join("b1x" + t.lower() for t in content.split())
            db.execute("INSERT INTO atoms_fts(rowid, body) VALUES (?, ?)", (cur.lastrowid, body))
    db.close()


def test_an_older_store_is_reindexed_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    older_store(path)
    store = Store(path)
    try:
        assert int(store.db.execute("PRAGMA user_version").fetchone()[0]) == schema.LATEST
        assert fts.pending(store.db) is None
        assert len(found(store, "deploy")) == len(OLD_ENTRIES)
        assert len(found(store, "rollouts")) == sum(1 for _c, k in OLD_ENTRIES if k)
    finally:
        store.close()


def test_a_reindex_stopped_midway_goes_on_from_its_last_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.db"
    older_store(path)
    monkeypatch.setattr(fts, "REINDEX_BATCH", 5)
    real_add, calls = fts.add, []

    def add_then_stop(db: sqlite3.Connection, rows: Any, language: str) -> None:
        calls.append(len(rows))
        if len(calls) == 3:
            raise KeyboardInterrupt  # the process stopped inside its third batch
        real_add(db, rows, language)

    monkeypatch.setattr(fts, "add", add_then_stop)
    with pytest.raises(KeyboardInterrupt):
        Store(path)
    db = sqlite3.connect(path)
    assert fts.pending(db) == (10, len(OLD_ENTRIES))  # two batches kept, the third rolled back
    db.close()
    monkeypatch.setattr(fts, "add", real_add)
    store = Store(path)
    try:
        assert fts.pending(store.db) is None
        hits = store.search("alice", SearchQuery(query="deploy", top_k=500))
        assert sorted(h.entry.atom_id for h in hits) == [f"00000000-0000-4000-8000-{i:012d}" for i in range(23)]
    finally:
        store.close()


def test_entries_written_during_a_reindex_are_indexed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "old.db"
    older_store(path)
    db = sqlite3.connect(path, isolation_level=None)
    with immediate(db):  # migration 7 applied, its reindex not begun (as a process stopped right after it)
        schema.m007_stemmed_search(db)
        db.execute("PRAGMA user_version = 7")
    db.close()
    monkeypatch.setattr(schema, "reindex", lambda db, batch=None: 0)  # the next open leaves it pending
    store = Store(path)
    store.write("alice", WriteRequest("written while it reindexed: deploying"))
    store.close()
    monkeypatch.undo()
    store = Store(path)
    try:
        assert len(found(store, "deploy")) == len(OLD_ENTRIES) + 1
    finally:
        store.close()


def test_a_read_only_store_with_a_reindex_under_way_is_refused(tmp_path: Path) -> None:
    from mnemo_tui.engine.sqlite.database import _open_read_only
    from mnemo_tui.errors import LocalStateError

    path = tmp_path / "old.db"
    older_store(path)
    db = sqlite3.connect(path, isolation_level=None)
    with immediate(db):
        schema.m007_stemmed_search(db)
        db.execute("PRAGMA user_version = 7")
    db.close()
    with pytest.raises(LocalStateError, match="needs a migration"):
        _open_read_only(str(path))


# -- the README's and docs' examples -------------------------------------------------------------------


def test_the_readme_search_examples_find_what_they_say(cli: Callable[..., Any], tmp_path: Path) -> None:
    store = str(tmp_path / "demo.db")
    assert cli("--store", store, "demo").code == 0
    flaky = cli("--store", store, "search", "flaky test", "--format", "ndjson")
    assert flaky.code == 0 and flaky.stdout.strip(), flaky
    assert "flaky" in flaky.stdout.lower()
    wrote = cli(
        "--store",
        store,
        "write",
        "Rolled back api-gateway 1.4.2: p99 doubled",
        "--scope",
        "ops",
        "--concept",
        "incident",
    )
    assert wrote.code == 0, wrote
    for query in ("incidents", "rollback api-gateway", "roll back"):
        hits = cli("--store", store, "search", query, "--scope", "ops", "--format", "ndjson")
        assert "Rolled back api-gateway" in hits.stdout, (query, hits)


def test_a_newer_stores_reindex_is_left_to_it(tmp_path: Path) -> None:
    from mnemo_tui.errors import LocalStateError

    path = tmp_path / "newer.db"
    store = Store(path)
    store.write("alice", WriteRequest("written by a newer mnemo"))
    store.close()
    db = sqlite3.connect(path, isolation_level=None)
    with immediate(db):
        fts.schedule(db)  # a reindex of the newer one's, under way
        db.execute(f"PRAGMA user_version = {schema.LATEST + 1}")
    db.close()
    with pytest.raises(LocalStateError, match="newer mnemo"):
        Store(path)
    db = sqlite3.connect(path)
    assert fts.pending(db) == (0, 1)  # untouched
    db.close()
