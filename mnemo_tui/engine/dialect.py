"""Provides the SQL dialects of the two engines: everything their shared statements differ in, named once.

The engine's statements (feed.py, atoms.py, rooms.py, …) are written once, with `?` parameters, and
take from a `Dialect` the few pieces SQLite and PostgreSQL spell differently; nothing rewrites a
statement's text afterwards, so the SQL a reader sees is the SQL that runs (but for the driver's
parameter marker, which `sql` maps).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from mnemo_tui.limits import dumps

if TYPE_CHECKING:
    from typing import Any


class Dialect:
    """SQLite's spelling (the embedded engine's); `PgDialect` says where PostgreSQL's differs.

    Attributes:
        name: the engine's `kind`.
        atom_columns: the engine's own columns of `atoms` beyond the shared ones, each with the placeholder
            its value is written with (PostgreSQL's tsvector: see engine/postgres/search.py).
        outer_first_join: a join that reads its left table first (SQLite plans `CROSS JOIN` in the order written;
            PostgreSQL orders joins itself).
        row_lock: what a read that locks its rows until commit ends with (SQLite's write lock covers the file).
    """

    __slots__ = ()
    name = "sqlite"
    atom_columns: tuple[tuple[str, str], ...] = ()
    outer_first_join = "CROSS JOIN"
    row_lock = ""

    def sql(self, statement: str) -> str:
        """The statement as the driver takes it (sqlite3 takes `?` itself)."""
        return statement

    def each_concept(self, alias: str) -> str:
        """A FROM item yielding each concept of atom `a` as `<alias>.value`."""
        return f"json_each(a.concepts) {alias}"

    def one_of(self, column: str, values: list[str]) -> tuple[str, list[Any]]:
        """`column` is one of `values`, as a condition with one parameter however many values there are
        (one variable per value passed SQLite's limit of variables once data made the list long)."""
        return f"{column} IN (SELECT value FROM json_each(?))", [dumps(values)]


class PgDialect(Dialect):
    """PostgreSQL's spelling: psycopg's `%s` parameters, the tsvector column, row locks, arrays."""

    __slots__ = ()
    name = "postgres"
    atom_columns = (("search", "?::tsvector"),)
    outer_first_join = "JOIN"
    row_lock = " FOR UPDATE"

    def sql(self, statement: str) -> str:
        return _percent(statement)

    def each_concept(self, alias: str) -> str:
        return f"jsonb_array_elements_text(a.concepts::jsonb) AS {alias}(value)"

    def one_of(self, column: str, values: list[str]) -> tuple[str, list[Any]]:
        """`column` is one of `values`: one array parameter."""
        return f"{column} = ANY(?::text[])", [values]


@lru_cache(maxsize=512)
def _percent(statement: str) -> str:
    """A statement's `?` parameters as psycopg's `%s` (a literal `%` doubled); cached: statements are constants."""
    return statement.replace("%", "%%").replace("?", "%s")


SQLITE = Dialect()
POSTGRES = PgDialect()
