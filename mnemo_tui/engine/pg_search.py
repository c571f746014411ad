"""Provides the PostgreSQL engine's full-text literals: an entry's `tsvector` and a query's `tsquery`, built in Python.

The tokens are engine/fts.py's (bucket-stamped, lower-cased), never PostgreSQL's text parser's, so
no dictionary or stop word applies and hostile text is words, never syntax.
"""

from __future__ import annotations

from mnemo_tui.engine import fts

LEXEME_BYTES = 2046  # PostgreSQL's longest lexeme; a longer token is not indexed (nor matched)


def _lexemes(bucket: int, text: str) -> list[str]:
    return [t.lower() for t in fts.stamped(bucket, text) if len(t.encode()) <= LEXEME_BYTES]


def _quoted(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def vector(bucket: int, content: str) -> str:
    """An entry's tsvector literal: its bucket-stamped tokens with their positions (engine/fts.py's words)."""
    return " ".join(f"{_quoted(lex)}:{min(i, 16383)}" for i, lex in enumerate(_lexemes(bucket, content), 1))


def query(bucket: int, words: list[str]) -> str:
    """A query's tsquery literal in one bucket: each word a phrase of stamped tokens, any phrase matching."""
    found: list[str] = []
    for phrase in fts.phrases(bucket, words):
        lexemes = [t.lower() for t in phrase]
        if all(len(t.encode()) <= LEXEME_BYTES for t in lexemes):
            found.append("(" + " <-> ".join(_quoted(t) for t in lexemes) + ")")
    return " | ".join(dict.fromkeys(found))
