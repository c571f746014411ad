"""Tests of the streaming entry table (`cli/table.py`) on its own: each page is written when it is given, laid out
to the terminal's width on a terminal and tab-separated whole values in a pipe, and nothing of a page is kept."""

from __future__ import annotations

import io
import json

import pytest

from mnemo_tui.cli.table import ID_WIDTH, TableWriter, grid, key_value_table
from mnemo_tui.values.model import EmptyReport, Entry
from mnemo_tui.values.removals import Removal

NOW = 1_796_000_000_000_000  # a fixed "now", so ages and dates do not depend on the clock
HOUR = 3_600_000_000


class Terminal(io.StringIO):
    """A stream that says it is a terminal (what a table on screen is written to)."""

    def isatty(self) -> bool:
        return True


def entry(n: int, content: str = "", *, author: str = "alice", domain: str = "ops") -> Entry:
    wire = {
        "atom_id": f"{n:08x}-0000-4000-8000-000000000000",
        "content": content or f"note {n}",
        "domain": domain,
        "provenance": {"principal": author},
    }
    return Entry.of(wire["atom_id"], NOW - n * HOUR, json.dumps(wire))


@pytest.fixture(autouse=True)
def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("TZ", "UTC")


def test_each_page_is_written_when_given_and_none_is_kept() -> None:
    out = Terminal()
    table = TableWriter(out, now=NOW)
    table.rows([entry(1), entry(2)])
    first = out.getvalue()
    assert first.splitlines()[0].split() == ["WHEN", "AUTHOR", "DOMAIN", "CONTENT"]
    assert [line.split()[-1] for line in first.splitlines()[1:]] == ["00000001", "00000002"]
    table.rows([entry(3)])
    assert out.getvalue().startswith(first)  # the first page is on screen before the second comes
    later = out.getvalue()[len(first) :]
    assert later.count("\n") == 1 and "note 3" in later and "WHEN" not in later  # one header
    assert table.count == 3
    assert not [v for v in vars(table).values() if isinstance(v, list)]  # no row is held (flat memory)


def test_a_terminal_row_fits_its_width_and_clips_the_content() -> None:
    out = Terminal()
    TableWriter(out, now=NOW).rows([entry(1, "x" * 300), entry(2, "first line\nsecond line")])
    rows = out.getvalue().splitlines()[1:]
    assert all(len(row) <= 100 for row in rows)
    assert "…" in rows[0] and rows[0].endswith("00000001")
    assert "first line" in rows[1] and "second line" not in out.getvalue()


def test_wide_wraps_the_whole_content_under_its_column() -> None:
    out = Terminal()
    words = " ".join(f"word{i}" for i in range(60))
    TableWriter(out, now=NOW, wide=True).rows([entry(1, words)])
    rows = out.getvalue().splitlines()[1:]
    assert len(rows) > 1 and all(len(row) <= 100 for row in rows)
    shown = " ".join(row.strip() for row in rows).replace("00000001", "").split()
    assert shown[:3] == ["1h", "ago", "alice"] and shown[4:] == words.split()  # when, author, domain, content


def test_a_room_or_domain_feed_has_no_domain_column() -> None:
    out = Terminal()
    TableWriter(out, now=NOW, scope="ops").rows([entry(1)])
    assert out.getvalue().splitlines()[0].split() == ["WHEN", "AUTHOR", "CONTENT"]


def test_a_pipe_gets_whole_values_tab_separated_without_header() -> None:
    out = io.StringIO()
    hostile = "a\ttab and\nnewline " + "y" * 300
    TableWriter(out, now=NOW).rows([entry(1, hostile)])
    (line,) = out.getvalue().splitlines()
    when, author, domain, content, atom_id = line.split("\t")
    assert when.endswith("Z") and author == "alice" and domain == "ops"
    assert content == "a\\x09tab and⏎newline " + "y" * 300  # one safe line, never cut
    assert atom_id == entry(1).atom_id


def test_removals_are_rows_marked_removed() -> None:
    gone = Removal(atom_id="deadbeef-0000-4000-8000-000000000000", scope="ops", removed_at=NOW, reason="deleted")
    out = Terminal()
    TableWriter(out, now=NOW).removed([gone])
    assert "removed (deleted)" in out.getvalue() and out.getvalue().rstrip().endswith("deadbeef"[:ID_WIDTH])
    piped = io.StringIO()
    TableWriter(piped, now=NOW).removed([gone])
    assert piped.getvalue().split("\t")[1:4] == ["", "ops", "removed (deleted)"]


def test_an_empty_report_is_its_text() -> None:
    out = io.StringIO()
    report = EmptyReport(kind="empty_scope", scope=None, text="Nothing stored yet.")
    TableWriter(out, now=NOW).report(report)
    assert out.getvalue() == report.shown + "\n"


def test_a_grid_clips_its_free_column_on_a_terminal_only() -> None:
    rows = [["r1", "z" * 300, "x"]]
    out = Terminal()
    grid(out, ["NAME", "DESCRIPTION", "K"], rows, flex=1)
    assert all(len(line) <= 100 for line in out.getvalue().splitlines()) and "…" in out.getvalue()
    piped = io.StringIO()
    grid(piped, ["NAME", "DESCRIPTION", "K"], rows, flex=1)
    assert "z" * 300 in piped.getvalue()


def test_a_key_value_table_aligns_and_shows_each_value_as_one_safe_line() -> None:
    out = io.StringIO()
    key_value_table(out, [("scope", "ops"), ("consumer", "a\nb")])
    assert out.getvalue() == "scope     ops\nconsumer  a⏎b\n"
