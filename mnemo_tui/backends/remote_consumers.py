"""Provides the client of durable consumers (`/mnemo/consumers`, mnemo serve's extension) and `ServerWatermarks`,
the watermarks a catch-up keeps on such a server while its walk checkpoints stay local (docs/consumers.md)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from mnemo_tui import sanitize, timefmt
from mnemo_tui.backends.remote_wire import wire_time
from mnemo_tui.errors import Conflict, ConsumerMoved, NotFound, Unavailable, ValidationError
from mnemo_tui.limits import describe_scope
from mnemo_tui.state.statedb import Base, Checkpoint, StateDB, StateKey
from mnemo_tui.values.model import Value, Watermark

Call = Callable[..., Any]
PATH = "/mnemo/consumers"
UNKNOWN_CONSUMER = "unknown_consumer"  # the reason of the server's 404 for a consumer with no position
WHERE_ENV = "MNEMO_WATERMARKS"  # `local`: watermarks in the state database even where a server keeps consumers
SHARED = "default"  # the consumer every machine reads as unless told otherwise (docs/consumers.md)


class Position(Value):
    """A consumer's position on one scope as the server keeps it, and how far behind it is (from a listing)."""

    mark: Watermark
    host: str
    behind_entries: int | None = None
    behind_seconds: float | None = None


def _path(consumer: str) -> str:
    return f"{PATH}/{quote(consumer, safe='')}"


def _position(identity: str, body: Any) -> Position:
    try:
        created = body["created_at"]
        mark = Watermark(
            scope=body["scope"],
            consumer=str(body["consumer"]),
            created_at=None if created is None else timefmt.parse_iso(created),
            boundary_ids=tuple(str(i) for i in body["boundary_ids"]),
            updated_at=timefmt.parse_iso(body["updated_at"]),
        )
        entries, seconds = body.get("behind_entries"), body.get("behind_seconds")
        return Position(
            mark=mark,
            host=str(body.get("host") or ""),
            behind_entries=None if entries is None else int(entries),
            behind_seconds=None if seconds is None else float(seconds),
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        raise Unavailable(f"{identity} answered {PATH} with a body that is not a consumer's position") from None


def _mark_wire(created_at: int | None, ids: tuple[str, ...]) -> dict[str, Any]:
    return {"created_at": wire_time(created_at), "boundary_ids": list(ids)}


class Consumers:
    """The calls of `/mnemo/consumers` through a backend's `_call` (retries, the key, errors as the project's)."""

    def __init__(self, call: Call, identity: str) -> None:
        self.call = call
        self.identity = identity

    def positions(self, consumer: str) -> list[Position] | None:
        """The consumer's positions, one per scope ([]: none yet); None when the endpoint keeps no consumers
        (the hosted service: a 404 without the server's reason; or an answer that is no consumer document)."""
        try:
            answer = self.call("GET", _path(consumer))
        except NotFound as exc:
            if (exc.details or {}).get("reason") == UNKNOWN_CONSUMER:
                return []
            return None
        items = answer.get("positions") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            return None  # an endpoint that answers any path alike does not keep consumers either
        return [_position(self.identity, item) for item in items]

    def listing(self) -> list[Position] | None:
        """Every position of the key's principal, each with its lag; None when the endpoint keeps no consumers."""
        try:
            answer = self.call("GET", PATH)
        except NotFound:
            return None
        items = answer.get("consumers") if isinstance(answer, dict) else None
        if not isinstance(items, list):
            return None
        return [_position(self.identity, item) for item in items]

    def commit(
        self,
        consumer: str,
        scope: str | None,
        mark: tuple[int | None, tuple[str, ...]] | None,
        *,
        expected: Base,
        unconditional: bool = False,
        host: str = "",
    ) -> Position | None:
        """Move (or with `mark` None and `unconditional`, forget) the consumer's position on `scope`; returns the
        stored one.

        Raises:
            ConsumerMoved: the stored position is not `expected` (another pass committed first).
        """
        body = {
            "scope": scope,
            "position": None if mark is None else _mark_wire(*mark),
            "expected": None if expected is None else _mark_wire(*expected),
            "unconditional": unconditional,
            "host": host,
        }
        try:
            answer = self.call("POST", _path(consumer), body)
        except Conflict as exc:
            if (exc.details or {}).get("reason") != "consumer_moved":
                raise
            where = describe_scope(scope)
            raise ConsumerMoved(
                f"another pass of consumer {consumer!r} on {where} committed first: this pass's watermark did not "
                "move; its entries are delivered again next pass",
                details=exc.details,
            ) from None
        stored = answer.get("position") if isinstance(answer, dict) else None
        return None if stored is None else _position(self.identity, stored)

    def delete(self, consumer: str) -> int:
        """Forget the consumer on every scope; returns how many positions went."""
        answer = self.call("DELETE", _path(consumer))
        found = answer.get("deleted") if isinstance(answer, dict) else None
        return int(found) if isinstance(found, int) else 0


class ServerWatermarks:
    """What `CatchUp`, the watermark commands and the TUI use in place of the `StateDB` against an endpoint: its
    consumers' watermarks, compared and set per commit, where it keeps them; else (the hosted service answers 404)
    the local ones, said once. Walk checkpoints stay in the local state database (`--resume` continues a walk this
    machine printed), and no local run lock is taken (the server settles parallel passes: the later one's commit
    is refused).

    Args:
        consumers: the endpoint's consumer calls.
        local: the state database (checkpoints; local watermarks carried over on a consumer's first pass).
        notice: where a warning goes (stderr in the CLI).
        host: the name this machine commits as (`socket.gethostname()` unless given).
    """

    def __init__(
        self, consumers: Consumers, local: StateDB, notice: Callable[[str], None], host: str | None = None
    ) -> None:
        self.consumers = consumers
        self.local = local
        self.notice = notice
        self.host = socket.gethostname() if host is None else host
        self.path = local.path
        self.offered: bool | None = None  # whether the endpoint keeps consumers (None: not asked yet)
        self._asked: tuple[StateKey, Position | None] | None = None  # what `claim_run` read, for `load` next
        self._carried: dict[StateKey, Base] = {}  # local watermarks carried over: the server has none there yet

    def _absent(self) -> None:
        """The endpoint keeps no consumers: local watermarks from now on, said once."""
        if self.offered is None:
            self.notice(
                f"mnemo: {self.consumers.identity} keeps no consumers: watermarks stay in this machine's state "
                f"database ({self.local.path})"
            )
        self.offered = False

    def find(self, key: StateKey) -> Position | None:
        """The server's position of one consumer's scope, or None (none there, or no consumers kept)."""
        found = self.consumers.positions(key.consumer)
        if found is None:
            self._absent()
            return None
        self.offered = True
        return next((p for p in found if p.mark.scope == key.scope), None)

    def load(self, key: StateKey) -> Watermark | None:
        """The consumer's watermark on the scope: the server's; on its first pass there, a local watermark of
        this endpoint carried over (said). Warns when the shared `default` consumer was last moved from another
        machine (docs/consumers.md, "The shared default consumer")."""
        if self.offered is False:
            return self.local.load(key)
        asked, self._asked = self._asked, None
        found = asked[1] if asked is not None and asked[0] == key else self.find(key)
        if found is None:  # none on the server yet, or none kept there: the local one (carried over, or kept)
            carried = self.local.load(key)
            if carried is not None and self.offered:
                self._carried[key] = (carried.created_at, carried.boundary_ids)
                self.notice(
                    f"consumer {key.consumer!r} on {describe_scope(key.scope)}: carrying over this machine's local "
                    "watermark to the server (its first pass there)"
                )
            return carried
        if key.consumer == SHARED and found.host and found.host != self.host:
            self.notice(
                f"warning: consumer {SHARED!r} on {describe_scope(key.scope)} was last moved from {found.host!r}; "
                "this pass moves it from here, and each machine then misses what the other read: name this "
                "machine's reader with --consumer (or MNEMO_CONSUMER)"
            )
        return found.mark

    def positions(self) -> list[Position] | None:
        """Every position of the key's principal on the server, with its lag; None where none are kept."""
        if self.offered is False:
            return None
        found = self.consumers.listing()
        if found is None:
            self._absent()
        return found

    def list(self, backend: str, principal: str) -> list[Watermark]:
        """Every watermark of the key's principal: the server's, else the local ones."""
        found = self.positions()
        return self.local.list(backend, principal) if found is None else [p.mark for p in found]

    def commit(
        self,
        key: StateKey,
        created_at: int | None,
        boundary_ids: tuple[str, ...],
        *,
        force: bool = False,
        expected: Base = None,
    ) -> Watermark:
        """Move the watermark if the server's is still `expected` (or unconditionally with `force`) and drop the
        walk's local checkpoint, whichever pass committed.

        Raises:
            ConsumerMoved: another pass committed first (exit 9).
        """
        if self.offered is not False:
            if key in self._carried and self._carried[key] == expected:
                expected = None  # a pass from a carried-over watermark: the server had no position for it
            try:
                stored = self.consumers.commit(
                    key.consumer,
                    key.scope,
                    (created_at, boundary_ids),
                    expected=expected,
                    unconditional=force,
                    host=self.host,
                )
            except NotFound:
                self._absent()
            except ConsumerMoved:
                self.local.drop_checkpoint(key)
                raise
            else:
                self.offered = True
                self.local.drop_checkpoint(key)
                if stored is None:
                    raise Unavailable(f"{self.consumers.identity} answered a commit without the position it stored")
                return stored.mark
        return self.local.commit(key, created_at, boundary_ids, force=force)

    def reset(self, key: StateKey) -> bool:
        """Forget the watermark where it is kept (and any local checkpoint); returns whether there was one."""
        existed = self.find(key) is not None if self.offered is not False else False
        if self.offered:
            self.consumers.commit(key.consumer, key.scope, None, expected=None, unconditional=True, host=self.host)
        return self.local.reset(key) or existed

    # -- local: checkpoints, and no run lock on a server's consumers ----------------------------

    def claim_run(self, key: StateKey, run_id: str) -> None:
        """Where the endpoint keeps no consumers, one pass at a time as ever; else the server settles them. The
        position read to know which is kept for the pass's `load` (one request)."""
        if self.offered is None:
            self._asked = (key, self.find(key))
        if self.offered is False:
            self.local.claim_run(key, run_id)

    def release_run(self, key: StateKey, run_id: str) -> None:
        if self.offered is False:
            self.local.release_run(key, run_id)

    def save_checkpoint(self, key: StateKey, cp: Checkpoint) -> None:
        self.local.save_checkpoint(key, cp)

    def load_checkpoint(self, key: StateKey) -> Checkpoint | None:
        return self.local.load_checkpoint(key)

    def drop_checkpoint(self, key: StateKey) -> None:
        self.local.drop_checkpoint(key)


def kept_by(backend: object, state: StateDB, notice: Callable[[str], None]) -> StateDB | ServerWatermarks:
    """Where a reader's watermarks are: the endpoint's consumers where it keeps them (found out on first use),
    else `state`; `MNEMO_WATERMARKS=local` keeps them in `state` whatever the endpoint.

    Raises:
        ValidationError: `MNEMO_WATERMARKS` is neither `server` nor `local`.
    """
    calls = consumers_of(backend) if where_kept() == "server" else None
    return state if calls is None else ServerWatermarks(calls, state, notice)


def where_kept() -> str:
    """`server` or `local`: where `MNEMO_WATERMARKS` asks an endpoint's watermarks to be kept (`server` unless set).

    Raises:
        ValidationError: it is neither.
    """
    where = os.environ.get(WHERE_ENV, "server")
    if where not in ("server", "local"):
        raise ValidationError(f"{WHERE_ENV} must be `server` or `local`, not {sanitize.quoted(where)}")
    return where


def consumers_of(backend: object) -> Consumers | None:
    """The consumer calls of a remote backend (`RemoteBackend.consumers`; None for any other backend)."""
    made = getattr(backend, "consumers", None) if getattr(backend, "kind", "") == "remote" else None
    found = made() if callable(made) else None
    return found if isinstance(found, Consumers) else None
