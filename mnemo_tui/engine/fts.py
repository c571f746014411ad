"""Provides the search index's words: stemmed tokens stamped with their bucket, the same for both engines.

The FTS5 table is contentless, with two columns: an entry's content and its concepts, each
held as `b<bucket>x<token>`. A search for a word in bucket 7 looks up `b7x<stem>` only, whose
index entries hold bucket 7's rows and nothing else: how long a search takes, and how much work
it does, cannot depend on what other principals wrote (a word present in a foreign store costs
exactly what an absent one does). Tokens are made here, in Python, the same way for entries,
concepts and queries, and PostgreSQL indexes these very tokens (engine/postgres/search.py):

1. runs of letters and digits (`build-bot` is two tokens, `c++` one);
2. folded: lower case, and beyond ASCII, compatibility forms and accents taken off (`Café` is `cafe`);
3. stemmed by the Snowball stemmer of the store's language (PyStemmer; English by default, the
   `search_language` of the store's meta): `deploys`, `deployed` and `deploying` are `deploy`.

The stemmer is imported on first use (a search or a write), never by a read of the feed.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from mnemo_tui.errors import ValidationError

# Runs of letters and digits: what a word of an entry or a query is made of, on both sides.
_TOKEN = re.compile(r"[^\W_]+")
# Distinct words a query may hold: a query of 2,500 repeated words is one word, and no query
# makes the index evaluate more than this many phrases.
MAX_QUERY_WORDS = 32
DEFAULT_LANGUAGE = "english"
TOKEN_BYTES = 2046  # PostgreSQL's longest lexeme: a longer token is indexed (and matched) by neither engine
# Entries indexed by one transaction of a reindex: a batch takes a fraction of a second, so writers
# wait for no more than that, and a reindex stopped at any point goes on from its last batch.
REINDEX_BATCH = 5_000

_STEMMERS: dict[str, Callable[[list[str]], list[str]]] = {}


def languages() -> list[str]:
    """The languages a store's search may stem in (Snowball's algorithms)."""
    import Stemmer

    return list(Stemmer.algorithms())


def stemmer(language: str) -> Callable[[list[str]], list[str]]:
    """The stemmer of a language, made once a process.

    Raises:
        ValidationError: a language Snowball has no stemmer for.
    """
    found = _STEMMERS.get(language)
    if found is None:
        import Stemmer  # ~1 ms, paid by the first search or write of a process only

        if language not in Stemmer.algorithms():
            raise ValidationError(f"no stemmer for the language {language!r}; one of: {', '.join(languages())}")
        found = _STEMMERS[language] = Stemmer.Stemmer(language).stemWords
    return found


def _folded(token: str) -> list[str]:
    """A token beyond ASCII in its compatibility form, lower case, without the accents of Latin letters (as
    FTS5's unicode61 folds them); the marks of other scripts stay (`が` is not `か`). It may split: `½`."""
    import unicodedata

    kept: list[str] = []
    for ch in unicodedata.normalize("NFKD", token):
        if kept and unicodedata.combining(ch) and _latin(kept[-1]):
            continue
        kept.append(ch)
    return _TOKEN.findall(unicodedata.normalize("NFC", "".join(kept)).casefold())


def _latin(ch: str) -> bool:
    return ch < "\u0250" or "\u1e00" <= ch <= "\u1eff"


def tokens(text: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    """The index's tokens of a text, in order: split, folded and stemmed (unstamped)."""
    found: list[str] = []
    for token in _TOKEN.findall(text):
        if token.isascii():
            found.append(token.lower())
        else:
            found += _folded(token)
    return stemmer(language)(found) if found else found


def stamped(bucket: int, text: str, language: str = DEFAULT_LANGUAGE) -> list[str]:
    """The tokens of a text, in order, each stamped with the bucket (`b<bucket>x<token>`); a stamped token
    longer than `TOKEN_BYTES` is left out, on both engines alike."""
    stamp = f"b{bucket}x"
    return [
        stamp + token
        for token in tokens(text, language)
        if len(token) * 4 < TOKEN_BYTES - 24 or len((stamp + token).encode()) <= TOKEN_BYTES
    ]


def concept_texts(concepts: str | Iterable[str]) -> list[str]:
    """An entry's concepts, from the stored JSON list or the list itself."""
    if isinstance(concepts, str):
        import json

        loaded = json.loads(concepts) if concepts else []
        return [c for c in loaded if isinstance(c, str)]
    return list(concepts)


def columns(bucket: int, content: str, concepts: str | Iterable[str], language: str) -> tuple[str, str]:
    """What the index holds for one entry: its content's stamped tokens, and its concepts'."""
    return (
        " ".join(stamped(bucket, content, language)),
        " ".join(stamped(bucket, " ".join(concept_texts(concepts)), language)),
    )


def phrases(bucket: int, words: Iterable[str], language: str = DEFAULT_LANGUAGE) -> list[list[str]]:
    """A query's phrases in one bucket: each word's stamped tokens, any phrase matching (every engine's rule).

    Repeated words count once (as do words of one stem); at most `MAX_QUERY_WORDS` distinct words are
    kept (the first ones); a word without a letter or digit is no phrase (nothing can match it).
    """
    found: dict[tuple[str, ...], None] = {}
    for word in words:
        stems = tuple(stamped(bucket, word, language))
        if stems:
            found[stems] = None
            if len(found) == MAX_QUERY_WORDS:
                break
    return [list(p) for p in found]


def match(bucket: int, words: Iterable[str], language: str = DEFAULT_LANGUAGE) -> str:
    """The FTS5 expression of a query in one bucket: each phrase quoted, any of them matching ("" for none)."""
    return " OR ".join('"' + " ".join(p) + '"' for p in phrases(bucket, words, language))


Row = tuple[int, int, str, str]  # seq, bucket, content, concepts (the stored JSON list)


def _bodies(rows: Iterable[Row], language: str) -> Iterator[tuple[int, str, str]]:
    for seq, bucket, content, concepts in rows:
        yield (seq, *columns(bucket, content, concepts, language))


def add(db: sqlite3.Connection, rows: Iterable[Row], language: str) -> None:
    """Index entries, given as (seq, bucket, content, concepts), inside the transaction that inserted them."""
    db.executemany("INSERT INTO atoms_fts(rowid, body, concepts) VALUES (?, ?, ?)", _bodies(rows, language))


def add_since(db: sqlite3.Connection, seq: int, language: str) -> None:
    """Index every entry inserted after `seq` (a bulk insert indexes its rows in one pass)."""
    add(db, db.execute("SELECT seq, bucket, content, concepts FROM atoms WHERE seq > ?", (seq,)), language)


def remove(db: sqlite3.Connection, rows: Iterable[Row], language: str) -> None:
    """Drop entries, given as (seq, bucket, content, concepts), from the index (a contentless table needs
    the tokens back, made by the same rule)."""
    db.executemany(
        "INSERT INTO atoms_fts(atoms_fts, rowid, body, concepts) VALUES ('delete', ?, ?, ?)",
        _bodies(rows, language),
    )


# -- the store's language and its reindex (SQLite; engine/postgres/migrations.py runs the same over its column) --

LANGUAGE_KEY = "search_language"
# A reindex under way: the last seq indexed, and the last seq it must index (entries written since
# are indexed by their own write). Both absent: the index is whole.
DONE_KEY, UPTO_KEY = "search_reindexed", "search_reindex_upto"


def meta_text(db: Any, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else bytes(row[0]).decode()


def set_meta(db: Any, key: str, value: str) -> None:
    db.execute("DELETE FROM meta WHERE key = ?", (key,))
    db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (key, value.encode()))


def language_of(db: Any) -> str:
    """The store's search language (English when none is recorded)."""
    return meta_text(db, LANGUAGE_KEY) or DEFAULT_LANGUAGE


def schedule(db: Any) -> None:
    """Record a reindex of every entry stored now (inside the transaction that emptied the index)."""
    db.execute("DELETE FROM meta WHERE key IN (?, ?)", (DONE_KEY, UPTO_KEY))
    upto = int(db.execute("SELECT coalesce(max(seq), 0) FROM atoms").fetchone()[0])
    if upto:
        set_meta(db, DONE_KEY, "0")
        set_meta(db, UPTO_KEY, str(upto))


def pending(db: Any) -> tuple[int, int] | None:
    """(last seq indexed, last seq to index) of a reindex under way, or None."""
    done, upto = meta_text(db, DONE_KEY), meta_text(db, UPTO_KEY)
    return None if done is None or upto is None else (int(done), int(upto))


def next_batch(db: Any, batch: int) -> tuple[list[Row], int, bool] | None:
    """Inside a write transaction: the next rows of the reindex under way, the seq it reaches with them and
    whether it is then done (None: no reindex under way). Its progress is recorded in the same transaction."""
    found = pending(db)
    if found is None:
        return None
    done, upto = found
    rows = db.execute(
        "SELECT seq, bucket, content, concepts FROM atoms WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
        (done, upto, batch),
    ).fetchall()
    reached = int(rows[-1][0]) if len(rows) == batch else upto
    if reached >= upto:
        db.execute("DELETE FROM meta WHERE key IN (?, ?)", (DONE_KEY, UPTO_KEY))
    else:
        set_meta(db, DONE_KEY, str(reached))
    return rows, reached, reached >= upto


def tell_reindex(log: Any, said: int, indexed: int, done: bool, language: str, reached: int) -> int:
    """The reindex's progress on `log`, the same on both engines: a reindex of one batch says nothing; a longer
    one says that it runs, every 100,000 entries how far, and when it is done. Returns the count last told."""
    if (not said and not done) or indexed - said >= 100_000 or (done and said):
        log.warning(
            "rebuilding the search index (stems in %s, with concepts): %d entries indexed%s",
            language,
            indexed,
            ", done" if done else f", up to seq {reached}",
        )
        return indexed
    return said
