"""Provides the statements a streamed walk reads its pages with on SQLite (`SqliteDatabase.joined_pages`)."""

from __future__ import annotations

from functools import lru_cache

# A wire item with its later version spliced in, as `rules.with_superseded_by` splices it (characters, as Python's).
_SPLICED = (
    "CASE WHEN superseded_by IS NULL THEN wire "
    "ELSE substr(wire, 1, length(wire) - 1) || ',\"superseded_by\":\"' || superseded_by || '\"}' END"
)


@lru_cache(maxsize=64)
def page_sql(sql: str, spliced: bool) -> str:
    """A page of a feed statement (`FeedPlan.sql`, ending in `LIMIT ?`) as one row: its items' text joined, as
    UTF-8 bytes; its rows; and its least created_at (its last row's).

    `group_concat` joins in the order the subquery yields its rows: SQLite runs a subquery with a LIMIT as it is
    (never flattened into an aggregate), in its ORDER BY; the tests hold each page to the page read row by row."""
    item = _SPLICED if spliced else "wire"
    return f"SELECT CAST(group_concat({item}, ',') AS BLOB), count(*), min(created_at) FROM ({sql})"


@lru_cache(maxsize=64)
def position_sql(sql: str) -> str:
    """The created_at and atom_id of a feed statement's first rows."""
    return f"SELECT created_at, atom_id FROM ({sql})"
