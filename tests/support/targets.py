"""Where a test's data lives (`Target`: an embedded store file or a PostgreSQL database) and the backend kinds
the `make_backend` fixture of tests/conftest.py is parametrized over."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mnemo_tui.engine.sqlite.store import Store


class Target:
    """Where a test's engine keeps its data: an embedded store file, or a PostgreSQL database.

    Attributes:
        engine: `sqlite` or `postgres`.
        location: the store's path, or the database's URL (with its password).
    """

    def __init__(self, engine: str, location: Path | str) -> None:
        self.engine = engine
        self.location = location

    def open(self) -> Any:
        """A new engine over the target (the caller closes it)."""
        if self.engine == "postgres":
            from mnemo_tui.engine.postgres.store import PgStore

            return PgStore(str(self.location))
        return Store(self.location)

    def app(self, **options: Any) -> Any:
        """The app `mnemo serve` runs over the target."""
        from mnemo_tui.server.app import create_app

        if self.engine == "postgres":
            return create_app(database=str(self.location), **options)
        return create_app(self.location, **options)

    @property
    def cli(self) -> list[str]:
        """The root options of `mnemo` selecting the target."""
        return ["--database" if self.engine == "postgres" else "--store", str(self.location)]


BACKENDS = ["local", "remote", "local-pg", "remote-pg"]
