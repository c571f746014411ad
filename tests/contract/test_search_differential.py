"""Both engines find the same: one corpus written to an embedded store and to PostgreSQL, every query's set of
hits compared (the order may differ: bm25 and ts_rank are two formulas, see docs/server.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_tui.engine.postgres.store import PgStore
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest

CORPUS: list[tuple[str, str, str, tuple[str, ...]]] = [
    ("alice", "ops", "The API deploys on Cloudflare Workers", ("deploy",)),
    ("alice", "ops", "Deployment frozen on Fridays; deploying is refused", ()),
    ("alice", "ops", "Rolled back api-gateway 1.4.2: p99 doubled", ("incident", "rollback")),
    ("alice", "ci", "flaky test in test_walk: retried three times", ("flaky-tests",)),
    ("alice", "ci", "The build-bot restarted after the runner's disk filled", ()),
    ("alice", "ci", "c++ toolchain upgraded; C# builds unaffected", ("toolchain",)),
    ("alice", "research", "Café crème notes: Straße, naïve résumé, ﬁne print", ("unicode",)),
    ("alice", "research", "Running runners ran; the runner runs", ()),
    ("alice", "research", "日本語のテキスト and 中文 text side by side", ("cjk",)),
    ("alice", "research", "Connection connected connecting connections", ("network",)),
    ("alice", "research", "がっこう へ いく; Май и мой; ｆｕｌｌ-width ＡＰＩ", ("カタカナ",)),
    ("alice", "general", "a quote \" and a backslash \\ and 'single' ones", ()),
    ("alice", "general", "x" * 3000 + " long token then words deploy", ()),
    ("bob", "ops", "Bob deploys to his own store only", ("deploy",)),
    ("bob", "general", "nothing of alice's is here", ()),
]

QUERIES = [
    "deploy",
    "deploys",
    "deployment",
    "Workers worker",
    "rollback",
    "roll back",
    "api-gateway",
    "1.4.2",
    "p99",
    "flaky tests",
    "flaky-test",
    "build-bot",
    "bot-build",
    "c++",
    "c#",
    "cafe",
    "STRASSE",
    "naive resume",
    "fine",
    "run",
    "runner",
    "日本語のテキスト",
    "中文",
    "connect",
    "がっこう",
    "かっこう",
    "май",
    "full-width api",
    "ｶﾀｶﾅ",
    '"',
    "'single'",
    "backslash \\",
    "x" * 3000,
    "long-token",
    "incident toolchain unicode",
    "zebra",
    "alice's",
    "Bob",
]


@pytest.fixture(scope="module")
def engines(pg_databases: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, PgStore]]:
    name = pg_databases.create()
    sqlite = Store(Path(tmp_path_factory.mktemp("differential")) / "store.db")
    pg = PgStore(pg_databases.cluster.url(name))
    for store in (sqlite, pg):
        for principal, domain, content, concepts in CORPUS:
            store.write(principal, WriteRequest(content, domain=domain, concepts=concepts))
    try:
        yield sqlite, pg
    finally:
        sqlite.close()
        pg.close()
        pg_databases.drop(name)


def hits(store: Any, query: str, principal: str = "alice", scope: str | None = None) -> set[str]:
    found = store.search(principal, SearchQuery(query=query, scope=scope, top_k=500))
    return {h.entry.content for h in found}


@pytest.mark.parametrize("query", QUERIES, ids=[q[:24] for q in QUERIES])
def test_both_engines_return_the_same_hits(engines: tuple[Store, PgStore], query: str) -> None:
    sqlite, pg = engines
    for principal, scope in (("alice", None), ("alice", "ops"), ("bob", None)):
        assert hits(sqlite, query, principal, scope) == hits(pg, query, principal, scope), (query, principal, scope)


def test_the_corpus_holds_hits_to_compare(engines: tuple[Store, PgStore]) -> None:
    # The differential compares something: every query but these finds entries of alice's, by their stems.
    sqlite, _pg = engines
    empty = {"bot-build", '"', "x" * 3000, "zebra", "alice's", "Bob", "かっこう"}
    assert {q for q in QUERIES if not hits(sqlite, q)} == empty
    assert hits(sqlite, "deploy") == {
        "The API deploys on Cloudflare Workers",
        "Deployment frozen on Fridays; deploying is refused",
        "x" * 3000 + " long token then words deploy",
    }
    assert hits(sqlite, "Bob", "bob") == {"Bob deploys to his own store only"}
    assert hits(sqlite, "alice's", "bob") == {"nothing of alice's is here"}


WORDS = [c for _p, _d, content, concepts in CORPUS[:11] for c in (*content.split(), *concepts)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(WORDS) | st.text(min_size=1, max_size=8), min_size=1, max_size=5))
def test_any_query_of_the_corpus_words_finds_the_same_on_both(engines: tuple[Store, PgStore], words: list[str]) -> None:
    query = " ".join(words).replace("\x00", " ")
    if not query.strip():
        return
    sqlite, pg = engines
    assert hits(sqlite, query) == hits(pg, query), query
