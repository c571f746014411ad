"""Provides `Store`: the embedded SQLite engine, one store file read and written on behalf of principals."""

from __future__ import annotations

from mnemo_tui.engine.atoms import AtomOps
from mnemo_tui.engine.consumers import ConsumerOps
from mnemo_tui.engine.feed import FeedOps
from mnemo_tui.engine.follow import FollowOps
from mnemo_tui.engine.keys import KeyOps
from mnemo_tui.engine.memory_plane import MemoryOps
from mnemo_tui.engine.rooms import RoomOps
from mnemo_tui.engine.sqlite.database import SqliteDatabase
from mnemo_tui.engine.vault import VaultOps


class Store(SqliteDatabase, FeedOps, FollowOps, MemoryOps, RoomOps, AtomOps, VaultOps, KeyOps, ConsumerOps):
    """The embedded engine: an implementation of `engine.interface.Engine` over one SQLite file.

    Every method takes the acting principal explicitly: the CLI passes its own, the server the
    one its API key maps to. One `Store` holds one connection; open one per thread.
    """

    kind = "sqlite"

    def ping(self) -> None:
        """Prove the database answers and its file is still the one opened (raises when not)."""
        with self.reading() as db:
            self._check_file()
            db.execute("SELECT count(*) FROM meta").fetchone()
