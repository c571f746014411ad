"""Provides `Session`: what every screen reads with, handed to each screen by the app (no screen imports the app)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mnemo_tui.backends import Backend
from mnemo_tui.backends.remote_consumers import ServerWatermarks, kept_by
from mnemo_tui.catchup.walk import default_overlap
from mnemo_tui.state.statedb import StateDB


class Session:
    """The collaborators and settings of one run of the app (one object, shared by every widget).

    Only `consumer` ever changes (and `deleted_here` grows): the palette's "Switch consumer" sets it,
    then the scopes and the feed are read again. A holder, so a plain class, not a `Value`.

    Attributes:
        backend: what to read (the app's serialising wrapper around the backend it was given).
        state_path: the state database holding this consumer's watermarks (workers open their own).
        consumer: whose watermarks the counts and `c` use.
        clock: the current time in microseconds (tests fix it).
        poll_interval: seconds between live checks; None for none (tests poll by hand).
        page_size: entries per page read (1–100).
        keep_pages: pages held besides the first one.
        pin_notices: toasts and the window of `u` after `c` last until the app closes (the tests
            pin them, so a loaded machine cannot make one vanish before a test or snapshot looks).
        key_in_env: the endpoint's key came from MNEMO_API_KEY (which wins over a kept one): what a
            refused key's advice names. Never the key itself.
        deleted_here: the ids this app deletes or deleted itself (`d`): the live feed learns of their
            removal as of any other, and must not report it as a removal elsewhere.
    """

    __slots__ = (
        "backend",
        "clock",
        "consumer",
        "deleted_here",
        "keep_pages",
        "key_in_env",
        "page_size",
        "pin_notices",
        "poll_interval",
        "state_path",
    )

    def __init__(
        self,
        backend: Backend,
        state_path: Path,
        consumer: str,
        clock: Callable[[], int],
        poll_interval: float | None,
        page_size: int,
        keep_pages: int,
        pin_notices: bool = False,
        key_in_env: bool = False,
    ) -> None:
        self.backend = backend
        self.state_path = state_path
        self.consumer = consumer
        self.clock = clock
        self.poll_interval = poll_interval
        self.page_size = page_size
        self.keep_pages = keep_pages
        self.pin_notices = pin_notices
        self.key_in_env = key_in_env
        self.deleted_here: set[str] = set()

    @property
    def overlap(self) -> int:
        """The walk's overlap on this backend: what is new, and what a live poll re-reads."""
        return default_overlap(self.backend)

    @property
    def where(self) -> str:
        """The backend in a few words: `store.db (embedded)` or the endpoint's host and port."""
        identity = self.backend.identity
        if self.backend.kind == "remote":
            return identity.split("://", 1)[-1].split("/", 1)[0]
        return f"{Path(identity).name} (embedded)"

    def watermarks(self, state: StateDB) -> StateDB | ServerWatermarks:
        """Where this consumer's watermarks are: the endpoint's consumers where it keeps them (so a review on one
        machine is seen on another, docs/consumers.md), else `state` (opened by the worker asking)."""
        return kept_by(self.backend, state, lambda text: None)

    def probe(self) -> tuple[int, int] | None:
        """The backend's cheap change token (None on a backend without one: then poll)."""
        return self.backend.change_token()
