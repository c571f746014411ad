"""Provides the PostgreSQL engine's full-text literals: an entry's `tsvector` and a query's `tsquery`, built in Python.

The tokens are engine/fts.py's (bucket-stamped, folded, stemmed in the store's language), never
PostgreSQL's text parser's, so no dictionary or stop word applies, both engines hold the same
terms, and hostile text is words, never syntax.
"""

from __future__ import annotations

from collections.abc import Iterable

from mnemo_tui.engine import fts
from mnemo_tui.engine.feed import Matching

MAX_POSITION = 16383  # PostgreSQL's highest position: every later token is held at it


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def vector(bucket: int, content: str, concepts: str | Iterable[str] = (), language: str = fts.DEFAULT_LANGUAGE) -> str:
    """An entry's tsvector literal: its content's stamped tokens with their positions, then its concepts'.

    The concepts start one position after the content's end, so no phrase runs from the one into the
    other (as FTS5 keeps them in a column of their own).
    """
    body, more = fts.columns(bucket, content, concepts, language)
    content_lexemes = body.split()
    lexemes = [*content_lexemes, "", *more.split()]  # "" holds the gap's position
    return " ".join(f"{_quoted(lex)}:{min(i, MAX_POSITION)}" for i, lex in enumerate(lexemes, 1) if lex)


def query(bucket: int, words: list[str], language: str = fts.DEFAULT_LANGUAGE) -> str:
    """A query's tsquery literal in one bucket: each word a phrase of stamped tokens, any phrase matching."""
    found = ["(" + " <-> ".join(_quoted(t) for t in phrase) + ")" for phrase in fts.phrases(bucket, words, language)]
    return " | ".join(dict.fromkeys(found))


def matching(bucket: int, words: list[str], language: str) -> Matching | None:
    """PostgreSQL's full-text search: `@@` on the bucket-stamped tsvector, ranked by `ts_rank` (None: no term)."""
    expression = query(bucket, words, language)
    if not expression:
        return None
    return Matching(
        score="ts_rank(a.search, ?::tsquery)",
        source="atoms a",
        condition="a.search @@ ?::tsquery",
        params=[expression],
        leading=[expression],
    )
