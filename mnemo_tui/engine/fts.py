"""Provides the embedded store's search index: every token stamped with its bucket, so a match never leaves the caller's store.

The FTS5 table is contentless: its one column holds each entry's words as `b<bucket>x<token>`.
A search for a word in bucket 7 looks up `b7x<word>` only, whose index entries hold bucket 7's
rows and nothing else: how long a search takes, and how much work it does, cannot depend on
what other principals wrote (a word present in a foreign store costs exactly what an absent
one does). Tokens are split here, in Python, the same way for entries and queries (runs of
letters and digits), so both sides agree whatever FTS5's tokenizer would do with the rest.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable

# Runs of letters and digits: what a word of an entry or a query is made of, on both sides.
_TOKEN = re.compile(r"[^\W_]+")
# Distinct words a query may hold: a query of 2,500 repeated words is one word, and no query
# makes the index evaluate more than this many phrases.
MAX_QUERY_WORDS = 32


def stamped(bucket: int, content: str) -> list[str]:
    """The tokens of a text, in order, each stamped with the bucket (`b<bucket>x<token>`)."""
    stamp = f"b{bucket}x"
    return [stamp + token for token in _TOKEN.findall(content)]


def body(bucket: int, content: str) -> str:
    """What the index holds for one entry: its tokens, each stamped with the bucket."""
    return " ".join(stamped(bucket, content))


def phrases(bucket: int, words: Iterable[str]) -> list[list[str]]:
    """A query's phrases in one bucket: each word's stamped tokens, any phrase matching (every engine's rule).

    Repeated words count once; at most `MAX_QUERY_WORDS` distinct words are kept (the first ones);
    a word without a letter or digit is no phrase (nothing can match it).
    """
    found: dict[tuple[str, ...], None] = {}
    for word in words:
        tokens = tuple(stamped(bucket, word))
        if tokens:
            found[tokens] = None
            if len(found) == MAX_QUERY_WORDS:
                break
    return [list(p) for p in found]


def match(bucket: int, words: Iterable[str]) -> str:
    """The FTS5 expression of a query in one bucket: each phrase quoted, any of them matching ("" for none)."""
    return " OR ".join('"' + " ".join(p) + '"' for p in phrases(bucket, words))


def add(db: sqlite3.Connection, rows: Iterable[tuple[int, int, str]]) -> None:
    """Index entries, given as (seq, bucket, content), inside the transaction that inserted them."""
    db.executemany("INSERT INTO atoms_fts(rowid, body) VALUES (?, ?)", ((s, body(b, c)) for s, b, c in rows))


def add_since(db: sqlite3.Connection, seq: int) -> None:
    """Index every entry inserted after `seq` (a bulk insert indexes its rows in one pass)."""
    add(db, db.execute("SELECT seq, bucket, content FROM atoms WHERE seq > ?", (seq,)))


def remove(db: sqlite3.Connection, rows: Iterable[tuple[int, int, str]]) -> None:
    """Drop entries, given as (seq, bucket, content), from the index (a contentless table needs the text back)."""
    db.executemany(
        "INSERT INTO atoms_fts(atoms_fts, rowid, body) VALUES ('delete', ?, ?)",
        ((s, body(b, c)) for s, b, c in rows),
    )
