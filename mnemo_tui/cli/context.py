"""Provides what commands share: the resolved settings, and the backend and state database they open lazily."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from mnemo_tui.errors import LocalStateError, MissingExtra, ValidationError
from mnemo_tui.limits import check_consumer
from mnemo_tui.state.config import Settings, resolve, with_debug

if TYPE_CHECKING:
    # Imported where used: `mnemo recent` opens no state database, and the embedded store needs no httpx.
    from mnemo_tui.backends import Backend
    from mnemo_tui.cli.options import RootOptions
    from mnemo_tui.engine.interface import Engine
    from mnemo_tui.state.statedb import StateDB


@contextmanager
def needs_extra(extra: str, what: str) -> Iterator[None]:
    """Imports of an optional extra: without it, exit 2 naming the extra to install (never an internal error).

    Raises:
        MissingExtra: a module of the extra is not installed.
    """
    try:
        yield
    except ImportError:
        # The extra is named, not the module that failed first (mcp's own jsonschema, say).
        raise MissingExtra(extra, what) from None


def open_engine(settings: Settings, *, creates: bool = False) -> Engine:
    """The engine the settings select: PostgreSQL for a database (psycopg imported only then), else the store file
    (checked as `store_path` says)."""
    if settings.database:
        with needs_extra("postgres", "--database"):
            from mnemo_tui.engine.postgres.store import PgStore

        return PgStore(settings.database)
    from mnemo_tui.engine.sqlite.store import Store

    return Store(store_path(settings, creates=creates))


def open_backend(settings: Settings, *, creates: bool = False) -> Backend:
    """The backend the settings select: an engine in this process, or the endpoint (imported only then).

    A read never creates a store: a missing store at the default path reads as an empty one, and
    a missing store someone named (`--store`, `MNEMO_STORE`, a profile) is an error naming it.
    A write (`creates`) creates the file, and its folder only at the default path. A PostgreSQL
    database is initialized on first use (an empty one has no entries either way).

    Raises:
        LocalStateError: a named store that does not exist (for a read) or whose folder does not (a write).
    """
    if settings.endpoint:
        from mnemo_tui.backends.remote import RemoteBackend

        return RemoteBackend.from_settings(settings)
    from mnemo_tui.backends.local import LocalBackend

    if settings.database:
        return LocalBackend(open_engine(settings), settings.principal)
    path = store_path(settings, creates=creates)
    if not creates and not os.path.exists(path):
        return LocalBackend.empty(path, settings.principal)
    return LocalBackend.open(path, settings.principal)


def store_path(settings: Settings, *, creates: bool) -> str:
    """The embedded store's path, checked as `open_backend` says (a named store must exist, or its folder)."""
    path = settings.store_path
    assert path is not None
    given = settings.store_given
    named = f" (named by {given})" if given is not None else ""
    if os.path.isdir(path):
        example = os.path.join(path, "store.db")
        raise LocalStateError(f"{path}{named} is a folder, not a store file: name the file, e.g. {example}")
    if given is not None and not os.path.exists(path):
        if not os.path.isdir(os.path.dirname(path) or "."):
            raise LocalStateError(f"no store at {path}{named}, and its folder does not exist: check the path")
        if not creates:
            raise LocalStateError(
                f"no store at {path}{named}; check the path (a write such as `mnemo write` creates it)"
            )
    return path


class Context:
    """Per-invocation context handed to every command."""

    def __init__(
        self,
        settings: Settings,
        no_pager: bool = False,
        creates_store: bool = False,
        root: RootOptions | None = None,
    ) -> None:
        self.settings = settings
        self.no_pager = no_pager
        self.creates_store = creates_store
        # The root options as given (`flags.ROOT` by name): a command a person is told to run repeats them.
        self.root = root
        self._backend: Backend | None = None
        self._state: StateDB | None = None

    @staticmethod
    def of(root: RootOptions) -> Context:
        """The context the root options select (flags, then environment, then config.toml).

        `root` holds the values of the options of `flags.ROOT`, by name.
        """
        settings = resolve(profile=root.profile, store=root.store, endpoint=root.endpoint, database=root.database)
        if settings.warnings:
            import sys

            sys.stderr.write("".join(w + "\n" for w in settings.warnings))
        if root.utc:
            settings = settings.replace(utc=True)
        return Context(with_debug(settings, root.debug), no_pager=root.no_pager, root=root)

    @property
    def utc(self) -> bool:
        """Wall-clock times in UTC (`--utc`, `utc = true`), else on the local clock."""
        return self.settings.utc

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = open_backend(self.settings, creates=self.creates_store)
        return self._backend

    def store_missing(self) -> bool:
        """Whether the settings select the default embedded store and it does not exist (yet).

        A store someone named (`--store`, `MNEMO_STORE`, a profile) is not waited for: a missing one is
        a typo more often than a store to come, and reads say so (exit 6).
        """
        s = self.settings
        path = s.store_path
        return not (s.endpoint or s.database or s.store_given) and path is not None and not os.path.exists(path)

    def reopen(self) -> Backend:
        """The backend opened again: a store created since this command first looked finds its file."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None
        return self.backend

    @property
    def state(self) -> StateDB:
        if self._state is None:
            from mnemo_tui.state.statedb import StateDB

            self._state = StateDB(self.settings.state_path)
        return self._state

    def consumer(self, given: str | None) -> str:
        """The consumer a command reads as: `--consumer`, else the configured one (1 to 200 characters).

        Raises:
            ValidationError: a blank or over-long name.
        """
        return check_consumer(given if given is not None else self.settings.consumer)

    def embedded_only(self, command: str) -> None:
        """Refuse a command of the embedded store when an endpoint is selected, naming where it came from and the
        way back (a `mnemo login` on the server's own home leaves its endpoint the default there).

        Raises:
            ValidationError: an endpoint is selected.
        """
        if not self.settings.endpoint:
            return
        way = "name a store: `mnemo --store PATH " + command + "`"
        root = self.root
        if root is not None and root.endpoint is not None:
            source = "--endpoint"
        elif os.environ.get("MNEMO_ENDPOINT"):
            source, way = "MNEMO_ENDPOINT", way + ", or unset MNEMO_ENDPOINT"
        elif self.settings.profile is None:
            source = f"the top of {self.settings.config_path}"
        else:
            profile = self.settings.profile
            source = f"profile {profile!r} of {self.settings.config_path}"
            if (root is None or root.profile is None) and not os.environ.get("MNEMO_PROFILE"):
                way += ", or stop using the profile: `mnemo profile use --none` (`mnemo logout` also forgets its key)"
            else:
                way += ", or choose another profile (--profile, MNEMO_PROFILE)"
        raise ValidationError(
            f"`mnemo {command}` works on the embedded store only, and {source} selects the endpoint "
            f"{self.settings.endpoint}; to use an embedded store, {way}"
        )

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
        if self._state is not None:
            self._state.close()
