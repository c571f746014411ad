"""Provides the CLI's renderers: NDJSON and JSON written from wire text, and the `table` a person reads."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable
from typing import IO, Any

from mnemo_tui import timefmt
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import EmptyReport, Entry

FORMATS = ("table", "json", "ndjson")


def check_format(value: str, *, allow_ndjson: bool = True) -> str:
    allowed = FORMATS if allow_ndjson else ("table", "json")
    if value not in allowed:
        raise ValidationError(f"--format must be one of {', '.join(allowed)}, got {value!r}")
    return value


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def ndjson(out: IO[str], wires: Iterable[str]) -> None:
    """One JSON item per line, written as stored."""
    text = "\n".join(wires)
    if text:
        out.write(text + "\n")


def color_enabled(stream: IO[str]) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


class TableWriter:
    """Writes entries as aligned lines, page by page, so a long walk streams instead of buffering."""

    def __init__(self, out: IO[str] | None = None, now: int | None = None) -> None:
        self.out = out or sys.stdout
        self.color = color_enabled(self.out)
        self.width = shutil.get_terminal_size((100, 24)).columns if self.color else 100
        self.now = timefmt.now_us() if now is None else now
        self.header_done = False
        self.count = 0

    def _style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def header(self) -> None:
        if not self.header_done:
            line = f"{'AGE':>8}  {'CREATED (UTC)':<19}  {'AUTHOR':<16}  {'DOMAIN':<14}  CONTENT"
            self.out.write(self._style(line, "1") + "\n")
            self.header_done = True

    def rows(self, entries: list[Entry]) -> None:
        self.header()
        for entry in entries:
            self.count += 1
            age = timefmt.relative(entry.created_at, self.now)
            created = timefmt.to_iso(entry.created_at)[:19].replace("T", " ")
            author = _clip(entry.author, 16)
            domain = _clip(entry.domain, 14)
            fixed = 8 + 2 + 19 + 2 + 16 + 2 + 14 + 2
            room = max(10, self.width - fixed - 10)
            first = _clip(entry.first_line, room)
            extra = ""
            if entry.superseded_by:
                extra = self._style(" (superseded)", "2")
            self.out.write(
                f"{self._style(f'{age:>8}', '36')}  {created:<19}  {self._style(f'{author:<16}', '33')}  "
                f"{domain:<14}  {first}{extra}  {self._style(entry.atom_id[:8], '2')}\n"
            )

    def report(self, report: EmptyReport) -> None:
        self.out.write(report.text + "\n")


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def hint(message: str) -> None:
    """A message for the person at the terminal: stderr, never stdout."""
    sys.stderr.write(message + "\n")


def key_value_table(out: IO[str], rows: list[tuple[str, str]]) -> None:
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        out.write(f"{key.ljust(width)}  {value}\n")


def grid(out: IO[str], headers: list[str], rows: list[list[str]]) -> None:
    """A plain aligned grid (lists of rooms, secrets, keys, watermarks)."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    color = color_enabled(out)
    head = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    out.write((f"\x1b[1m{head}\x1b[0m" if color else head) + "\n")
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
