"""Provides what commands share: the resolved settings, and the backend and state database they open lazily."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mnemo_tui.cli.options import RootArgs
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import check_consumer
from mnemo_tui.state.config import Settings, resolve, with_debug

if TYPE_CHECKING:
    # Imported where used: `mnemo recent` opens no state database, and the embedded store needs no httpx.
    from mnemo_tui.backends import Backend
    from mnemo_tui.state.statedb import StateDB


def open_backend(settings: Settings) -> Backend:
    """The backend the settings select: the embedded store, or the endpoint (imported only then)."""
    if settings.endpoint:
        from mnemo_tui.backends.remote import RemoteBackend

        return RemoteBackend.from_settings(settings)
    from mnemo_tui.backends.local import LocalBackend

    assert settings.store_path is not None
    return LocalBackend.open(settings.store_path, settings.principal)


@dataclass
class Context:
    """Per-invocation context handed to every command."""

    settings: Settings
    _backend: Backend | None = field(default=None, init=False)
    _state: StateDB | None = field(default=None, init=False)

    @staticmethod
    def of(root: RootArgs) -> Context:
        """The context the root options select (flags, then environment, then config.toml)."""
        settings = resolve(profile=root.profile, store=root.store, endpoint=root.endpoint)
        return Context(with_debug(settings, root.debug))

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = open_backend(self.settings)
        return self._backend

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
        if self.settings.endpoint:
            raise ValidationError(f"`mnemo {command}` works on the embedded store only, not on an endpoint")

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
        if self._state is not None:
            self._state.close()
