"""Provides what a command writes: the formats (NDJSON and JSON from wire text, pretty JSON on a terminal), the
document or line of a command that makes one thing, a list's document or grid, and messages on stderr.

The rest of the CLI's output lives beside it: `table.py` (the tables), `pager.py`, `progress.py`, and
`terminal.py` (what the terminal is, and asking the person at it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from mnemo_tui import sanitize, timefmt
from mnemo_tui.cli import terminal
from mnemo_tui.cli.table import grid
from mnemo_tui.errors import ValidationError
from mnemo_tui.limits import dumps as _dumps

if TYPE_CHECKING:
    from typing import IO, Any

FORMATS = ("table", "json", "ndjson")
# JSON outputs are spelled as the store keeps them (the one `limits.dumps`).
dumps = _dumps


def check_format(value: str, *, allow_ndjson: bool = True) -> str:
    """Validate `--format`; `ndjson` only where the output is a list of entries.

    Raises:
        ValidationError: any other value.
    """
    allowed = FORMATS if allow_ndjson else ("table", "json")
    if value not in allowed:
        raise ValidationError(f"--format must be one of {', '.join(allowed)}, got {value!r}")
    if value != "table":
        # Machine formats are UTF-8 bytes whatever the locale says (a cp1252 console included).
        reconfigure = getattr(sys.stdout, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(encoding="utf-8", errors="strict")
    if value == "json" and terminal.is_tty(sys.stdout) and not isinstance(sys.stdout, _PrettyJson):
        sys.stdout = _PrettyJson(sys.stdout)
    if value == "ndjson" and terminal.is_tty(sys.stdout) and not isinstance(sys.stdout, _NdjsonForTerminal):
        sys.stdout = _NdjsonForTerminal(sys.stdout)
    return value


class _PrettyJson:
    """Holds a JSON document meant for a person's terminal, to print it indented (`finish_stdout`).

    A pipe gets the compact document, exact. On a terminal the same document is indented, and the
    characters a terminal would act on (C1 controls, bidi marks, line separators) stay escaped.
    """

    def __init__(self, real: IO[str]) -> None:
        self.real = real
        self.parts: list[str] = []

    def write(self, data: str) -> int:
        self.parts.append(data)
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()

    def finish(self) -> None:
        import json

        for line in "".join(self.parts).splitlines():
            try:
                pretty = json.dumps(json.loads(line), indent=2, ensure_ascii=False)
            except ValueError:
                pretty = line
            self.real.write(json_for_terminal(pretty) + "\n")
        self.real.flush()


class _NdjsonForTerminal:
    """NDJSON meant for a person's terminal: each line as written, with what a terminal would act on escaped
    (`json_for_terminal`: the same JSON values), as `json` and `export` are; a pipe gets the stored bytes."""

    def __init__(self, real: IO[str]) -> None:
        self.real = real

    def write(self, data: str) -> int:
        self.real.write(json_for_terminal(data))
        return len(data)

    def flush(self) -> None:
        self.real.flush()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()


def json_for_terminal(text: str) -> str:
    """JSON text with the characters a terminal would act on (C1 controls, bidi marks, line separators)
    escaped: they can only stand inside JSON strings, so the value is unchanged."""
    import re

    unsafe = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
    return unsafe.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def finish_stdout() -> None:
    """Write what a terminal's JSON document held (see `_PrettyJson`); nothing otherwise."""
    held = sys.stdout
    if isinstance(held, _PrettyJson):
        sys.stdout = held.real
        held.finish()


def document_or_line(fmt: str, document: Any, line: str) -> None:
    """What a command that makes one thing prints: the JSON document, or in a table the one line scripts read
    (an id or a code an endpoint sent: shown through the sanitizer, as every text a person reads)."""
    sys.stdout.write((dumps(document) if fmt == "json" else sanitize.line(line)) + "\n")


def ndjson(out: IO[str], wires: Iterable[str]) -> None:
    """One JSON item per line, written as stored."""
    text = "\n".join(wires)
    if text:
        out.write(text + "\n")


def write_utf8(out: IO[str], data: bytes) -> None:
    """UTF-8 bytes onto a text output: straight onto its bytes where it writes UTF-8 (stdout as `check_format`
    leaves it for a machine format), after what it holds; else decoded (a terminal's wrapper escapes them)."""
    buffer = getattr(out, "buffer", None)
    if buffer is not None and str(getattr(out, "encoding", "")).lower() in ("utf-8", "utf8"):
        out.flush()
        buffer.write(data)
    else:
        out.write(data.decode())


def shell_quote(text: str) -> str:
    """Quote a value for a shell command line a person can paste (only when it needs it)."""
    import shlex

    return shlex.quote(text)


def hint(message: str) -> None:
    """A message for the person at the terminal: stderr, never stdout.

    The message is mnemo's own text; any stored or endpoint text in it was passed through
    `mnemo_tui.sanitize` where it was interpolated (the sanitizer is not idempotent: never twice).
    """
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def listed_time(us: int, utc: bool, *, age: bool = False) -> str:
    """A time in a list's table: for a person on a terminal (`2026-11-30 08:00:00 CET`, or the age with
    `age`), and in a pipe as an entry row's, ISO-8601 with its offset (`Z` in UTC): one way per output kind."""
    if not terminal.is_tty(sys.stdout):
        return timefmt.iso_offset(us, utc)
    return timefmt.relative(us) if age else timefmt.shown(us, utc)


def listing(
    fmt: str, document: Any, *, empty: str, headers: list[str], rows: list[list[str]], flex: int | None = None
) -> None:
    """What a command that lists things prints: the JSON document; or the grid, or what to do when it is empty."""
    out = sys.stdout
    if fmt == "json":
        out.write(dumps(document) + "\n")
    elif not rows:
        out.write(empty + "\n")
    else:
        grid(out, headers, rows, flex=flex)
