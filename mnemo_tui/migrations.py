"""Provides the one migration runner: a database's schema as a registry of numbered steps, each applied once.

The store on SQLite (engine/sqlite/schema.py), the store on PostgreSQL (engine/postgres/schema.py)
and the state database (state/statedb.py) each register their steps here, in order:

    MIGRATIONS = Migrations()

    @MIGRATIONS.step(1, "initial")
    def m001_initial(db): ...

and run them with `run`, saying where their database records its version (`PRAGMA user_version`,
or PostgreSQL's `mnemo_schema` table) and what one step's transaction is (SQLite's `BEGIN
IMMEDIATE`; PostgreSQL's transaction under its advisory lock).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager

D = TypeVar("D")


class Migrations(Generic[D]):
    """The numbered steps of one database's schema, in order; iterating yields (number, name, step)."""

    __slots__ = ("_steps",)

    def __init__(self) -> None:
        self._steps: list[tuple[int, str, Callable[[D], None]]] = []

    def step(self, number: int, name: str) -> Callable[[Callable[[D], None]], Callable[[D], None]]:
        """Register the decorated function as step `number`; numbers follow each other from 1."""

        def register(fn: Callable[[D], None]) -> Callable[[D], None]:
            assert number == len(self._steps) + 1, f"step {number} registered after step {len(self._steps)}"
            self._steps.append((number, name, fn))
            return fn

        return register

    def __iter__(self) -> Iterator[tuple[int, str, Callable[[D], None]]]:
        return iter(self._steps)

    @property
    def latest(self) -> int:
        """The number of the last step: the version of a database with every step applied."""
        return len(self._steps)

    def run(
        self,
        db: D,
        *,
        read: Callable[[D], int],
        record: Callable[[D, int], None],
        transaction: Callable[[], AbstractContextManager[object]],
        upto: int | None = None,
        admit: Callable[[int, int], None] | None = None,
    ) -> int:
        """Apply every step past the database's version (up to step `upto`), each in its own `transaction()`;
        returns the version reached.

        The version is read again inside each transaction (another process may have applied the step
        while this one waited for it) and `admit(version, number)` may refuse the step there (raising);
        `record(db, number)` writes the new version in the same transaction as the step.
        """
        version = read(db)
        for number, _name, apply in self._steps:
            if upto is not None and number > upto:
                break
            if number <= version:
                continue
            with transaction():
                version = read(db)
                if admit is not None:
                    admit(version, number)
                if version < number:
                    apply(db)
                    record(db, number)
                    version = number
        return version
