"""Provides the one error hierarchy of mnemo: each error knows its wire code, status and exit code."""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any


class ExitCode(IntEnum):
    """The CLI's exit codes (docs/cli.md, "Exit codes and signals"): every `return`, `exit` and error of the CLI names one."""

    OK = 0  # success; `catchup --exit-code`: something new
    FAILED = 1  # a check failed (`check`, `verify`); `catchup --exit-code`: nothing new
    USAGE = 2  # a bad flag or value, a forged cursor, an unknown id, a conflict
    AUTH = 3  # no key, a refused key, no place to keep one
    FORBIDDEN = 4  # not a member, an unknown room, a read-only member writing, not the owner
    BACKEND = 5  # unreachable, or failed after retries
    LOCAL_STATE = 6  # local configuration or state unreadable (or the output cannot be written)
    OUTPUT_CLOSED = 7  # `catchup`: the output closed before the pass ended; the watermark did not move
    REMOVALS_GONE = 8  # `catchup --changes`: the watermark is older than the removals kept
    OVERTAKEN = 9  # `catchup`: another pass of the same consumer committed first
    INTERRUPTED = 130  # Ctrl-C: nothing half-committed


class WouldWait(Exception):
    """An engine told never to wait (`Engine.never_wait`) did not begin a write whose lock another holds:
    nothing was done, and the caller does it where waiting is fine. Never an answer, so no `MnemoError`."""


class MnemoError(Exception):
    """Base of every error mnemo raises on purpose.

    Attributes:
        code: the wire error code (`VALIDATION_ERROR`, ...).
        status: the HTTP status the server answers with.
        exit_code: the CLI exit code (docs/cli.md).
        retryable: whether a client may retry the same request.
    """

    code = "INTERNAL"
    status = 500
    exit_code: int = ExitCode.BACKEND
    retryable = False

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def envelope(self, request_id: str | None = None) -> dict[str, Any]:
        """The flat error envelope of docs/server.md."""
        return {
            "code": self.code,
            "message": self.message,
            "requestId": request_id,
            "retryable": self.retryable,
            "details": self.details,
        }


class ValidationError(MnemoError):
    """Bad field value, bad time, malformed/forged/foreign cursor, limits exceeded."""

    code = "VALIDATION_ERROR"
    status = 400
    exit_code = ExitCode.USAGE


class MissingExtra(ValidationError):
    """A command whose optional extra is not installed: exit 2 naming the extra and the command that adds it.

    The command reinstalls this copy of mnemo from where it came (`install_command`): mnemo is not on
    PyPI, so `pip install 'mnemo-tui[mcp]'` would find nothing.
    """

    def __init__(self, extra: str, what: str) -> None:
        super().__init__(f"{what} needs the {extra} extra, which is not installed here: {install_command(extra)}")


def install_command(extra: str) -> str:
    """The shell command that installs this copy of mnemo again with `extra`, from where it was installed.

    Read from the install's PEP 610 record (`direct_url.json`: a checkout, a wheel file, a git URL); with
    the interpreter's pip, or `pipx`/`uv tool` when this is one of their environments.
    """
    import json
    import shlex
    import sys
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    try:
        record = json.loads(metadata.distribution("mnemo-tui").read_text("direct_url.json") or "null")
    except (metadata.PackageNotFoundError, ValueError):
        record = None
    editable = False
    spec = f"mnemo-tui[{extra}]"  # installed from an index of your own
    if isinstance(record, dict) and isinstance(record.get("url"), str):
        url = record["url"]
        if "vcs_info" in record:
            spec = f"mnemo-tui[{extra}] @ {record['vcs_info'].get('vcs', 'git')}+{url}"
        elif url.startswith("file://"):
            spec = f"{unquote(urlparse(url).path)}[{extra}]"
            editable = bool(record.get("dir_info", {}).get("editable"))
        else:
            spec = f"mnemo-tui[{extra}] @ {url}"
    prefix = sys.prefix.replace("\\", "/")
    if "/pipx/venvs/" in prefix:
        return f"pipx install --force {shlex.quote(spec)}"
    if "/uv/tools/" in prefix:
        return f"uv tool install --force {shlex.quote(spec)}"
    return f"{shlex.quote(sys.executable)} -m pip install {'-e ' if editable else ''}{shlex.quote(spec)}"


class Unprocessable(ValidationError):
    """A well-formed request past one of the engine's bounds (a cap on work, text no engine stores): 422,
    the message naming the bound."""

    status = 422


class AuthError(MnemoError):
    """No key, a refused key, or no place to keep a key."""

    code = "UNAUTHORIZED"
    status = 401
    exit_code = ExitCode.AUTH


class Forbidden(MnemoError):
    """Not a member, an unknown room (same answer), read-only member writing, not the owner."""

    code = "FORBIDDEN"
    status = 403
    exit_code = ExitCode.FORBIDDEN


class NotFound(MnemoError):
    """Unknown atom or invite code."""

    code = "NOT_FOUND"
    status = 404
    exit_code = ExitCode.USAGE


class Conflict(MnemoError):
    """Room name taken, invite used up or expired."""

    code = "CONFLICT"
    status = 409
    exit_code = ExitCode.USAGE


class RemovalsGone(MnemoError):
    """`catchup --changes`: the watermark is older than the removals kept (their retention): re-read the scope."""

    code = "REMOVALS_GONE"
    status = 410
    exit_code = ExitCode.REMOVALS_GONE


class ConsumerMoved(MnemoError):
    """`catchup`: another pass of the same consumer committed first (the server's compare-and-set refused)."""

    code = "CONSUMER_MOVED"
    status = 409
    exit_code = 9


class PayloadTooLarge(MnemoError):
    """A request body over the size limit."""

    code = "PAYLOAD_TOO_LARGE"
    status = 413
    exit_code = ExitCode.USAGE


class RateLimited(MnemoError):
    """Too many requests; retry after a while."""

    code = "RATE_LIMITED"
    status = 429
    exit_code = ExitCode.BACKEND
    retryable = True


class Unavailable(MnemoError):
    """The backend is unreachable or failed after retries."""

    code = "UNAVAILABLE"
    status = 503
    exit_code = ExitCode.BACKEND
    retryable = True


class Timeout(Unavailable):
    """A request ran past its deadline and was stopped (the server's bound on what one request may cost)."""

    retryable = False


class FateUnknown(Unavailable):
    """The connection was lost while a write committed: it may be stored or not, so it is never retried blindly."""

    retryable = False


class LocalStateError(MnemoError):
    """A local configuration or state file cannot be read; the message names it and the way out."""

    code = "LOCAL_STATE"
    status = 500
    exit_code = ExitCode.LOCAL_STATE


class CheckFailed(MnemoError):
    """A check (`check`, `verify`) failed."""

    code = "CHECK_FAILED"
    status = 500
    exit_code = ExitCode.FAILED


class BrokenFeed(CheckFailed):
    """The feed broke its contract in the middle of a walk: a cursor that does not advance.

    A check has failed, and no walk may go on: the same error, and exit code 5, in every use
    (`catchup`, `recent --all`, `verify`, `check`, the TUI), so `catchup --exit-code` never
    reads a looping backend as "nothing new".
    """

    code = "BROKEN_FEED"
    status = 502
    exit_code = ExitCode.BACKEND


BY_CODE: dict[str, type[MnemoError]] = {
    cls.code: cls
    for cls in (
        ValidationError,
        AuthError,
        Forbidden,
        NotFound,
        Conflict,
        RemovalsGone,
        ConsumerMoved,
        PayloadTooLarge,
        RateLimited,
        Unavailable,
    )
}
