"""Provides the feed's notices: the "N new" marker, the empty report of a scope, and a retryable error."""

from __future__ import annotations

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from mnemo_tui import sanitize
from mnemo_tui.catchup import empty_reports
from mnemo_tui.errors import AuthError, MnemoError, Unavailable
from mnemo_tui.tui.data.errors import as_error
from mnemo_tui.tui.plain import plain, plain_block
from mnemo_tui.tui.session import Session
from mnemo_tui.values.model import EmptyReport, RecentQuery


def report_head(report: EmptyReport) -> list[str]:
    """An empty report's lines as the TUI shows them: its rooms and the CLI's "Re-run with --scope …" (the
    product's words, which `mnemo check` asserts for the CLI) give way to the rooms as a list to pick from."""
    lines = report.shown.splitlines()  # room names in it are one line each: none forges a line
    return [line for line in lines if not line.startswith("  - ") and not line.startswith("Re-run with")]


def room_options(report: EmptyReport) -> list[Option]:
    """The rooms an empty report names, one option each (its id the room's address)."""
    width = max((len(sanitize.line(r.name)) for r in report.unsearched_rooms), default=0)
    return [
        Option(
            Content.from_markup(
                "[b]$name[/b]  [$text-muted]$address[/]",
                name=sanitize.line(r.name).ljust(width),
                address=sanitize.line(r.address),
            ),
            id=r.address,
        )
        for r in report.unsearched_rooms
    ]


class NewMarker(Static):
    """`▲ 3 new — press g to show them`, shown instead of moving the list while the reader is away from the top."""

    def show_count(self, count: int, overflow: bool) -> None:
        """Show the count of held new entries (hidden at zero)."""
        self.display = count > 0
        more = "+" if overflow else ""
        noun = "entry" if count == 1 and not overflow else "entries"
        self.update(f"▲ {count}{more} new {noun} — press g to show")


class ReportView(Vertical):
    """An empty scope's report, which it reads itself; the rooms it did not search can be selected."""

    class RoomChosen(Message):
        """The reader picked an unsearched room."""

        def __init__(self, address: str) -> None:
            super().__init__()
            self.address = address

    class Ready(Message):
        """The report is read and shown (or its read failed: `error`)."""

        def __init__(self, error: MnemoError | None) -> None:
            super().__init__()
            self.error = error

    class _Read(Message, bubble=False):
        def __init__(self, token: int, report: EmptyReport | None, error: MnemoError | None) -> None:
            super().__init__()
            self.token = token
            self.report = report
            self.error = error

    def __init__(self, session: Session, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.session = session
        self._token = 0

    def load(self, query: RecentQuery) -> None:
        """Read the empty report of a read (the one `mnemo recent` prints)."""
        self._token += 1
        self._read(self._token, query)

    def forget(self) -> None:
        """The scope changed: a report still being read is for the old one."""
        self._token += 1

    @work(thread=True, group="report", exit_on_error=False)
    def _read(self, token: int, query: RecentQuery) -> None:
        try:
            self.post_message(self._Read(token, empty_reports.for_recent(self.session.backend, query), None))
        except Exception as exc:  # noqa: BLE001 - shown as the feed's error, with a retry
            self.post_message(self._Read(token, None, as_error(exc)))

    @on(_Read)
    def _loaded(self, message: _Read) -> None:
        if message.token != self._token:
            return
        if message.report is not None:
            self.show(message.report)
        self.post_message(self.Ready(message.error))

    def compose(self) -> ComposeResult:
        yield Static("", id="report-text")
        yield OptionList(id="report-rooms")

    def show(self, report: EmptyReport) -> None:
        """Show a report and its rooms."""
        head = report_head(report)
        if report.kind == "empty_scope":  # what to do next, before the rooms it did not read
            head[1:1] = ["", self._first_steps(report.scope), ""]
        self.query_one("#report-text", Static).update(plain_block("\n".join(head)))
        rooms = self.query_one("#report-rooms", OptionList)
        rooms.set_options(room_options(report))
        rooms.display = bool(report.unsearched_rooms)
        if report.unsearched_rooms:
            rooms.highlighted = 0
            self.query_one("#report-text", Static).update(
                plain_block("\n".join([*head, "", "Select a room to read it:"]))
            )

    def _first_steps(self, scope: str | None) -> str:
        """What to do in a scope with nothing in it: write (`w`), and on an embedded own store, `mnemo demo`."""
        if scope is None and self.session.backend.kind != "remote":
            return (
                "Press w to write the first entry, or run `mnemo demo` in a shell to fill this store "
                "with sample entries and two rooms."
            )
        return "Press w to write the first entry here."

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.post_message(self.RoomChosen(event.option.id))


def describe_error(error: MnemoError, key_in_env: bool = False) -> tuple[str, str]:
    """A title and a hint for an error the reader can act on.

    A refused key cannot be fixed from inside the app: it keeps the key it was started with (neither a
    variable set in another shell nor a later `mnemo login` reaches it), so the hint says to start
    again, and which source wins (`key_in_env`: the key came from MNEMO_API_KEY). The key is never shown.
    """
    if isinstance(error, Unavailable):
        return "The backend is unreachable", "Check that the endpoint is up (or your network), then press r to retry."
    if isinstance(error, AuthError):
        kept = "This app keeps the key it was started with, so r would send the same one."
        if key_in_env:
            return "The key was refused", (
                f"{kept} Quit (q), set MNEMO_API_KEY to the right key (it wins over a key kept by "
                "`mnemo login`; unset it to use that one), and start mnemo tui again."
            )
        return "The key was refused", (
            f"{kept} Quit (q), keep the right key with `mnemo login` (`mnemo login --insecure-storage` "
            "where there is no OS keyring) or set MNEMO_API_KEY, and start mnemo tui again."
        )
    return f"The backend refused the read ({error.code})", "Press r to retry, or pick another scope."


class ErrorView(Static):
    """A failed read: what happened and how to retry. Nothing is lost; the app stays open."""

    def show_error(self, error: MnemoError, key_in_env: bool = False) -> None:
        title, hint = describe_error(error, key_in_env)
        self.update(
            Content.assemble(
                ("⚠ " + sanitize.line(title) + "\n\n", "bold $error"),
                plain(error.message),
                "\n\n",
                (hint, "$text-muted"),
            )
        )
