"""Provides `EntryActions`: what a person does to an entry from the feed — copy, page, revise, write, delete.

Each action checks the shared rules (`mnemo_tui.verbs`) first and gives a notice instead of
writing anything it may not; the outside programs (`$PAGER`, `$EDITOR`) run with the app
suspended; every write or delete goes through a thread worker, like every read.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from textual.app import App, SuspendNotSupported
from textual.widget import Widget

from mnemo_tui import text, timefmt, verbs
from mnemo_tui.model import Entry, Room, WriteRequest
from mnemo_tui.tui.messages import as_error
from mnemo_tui.tui.screens.confirm import ConfirmScreen
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.rows import headline, short_id

# What an empty or unchanged file from the editor means: nothing is written.
NOTHING_WRITTEN = "nothing written: the text was empty or unchanged"


def program(*names: str, fallback: str) -> list[str]:
    """The command of the first environment variable set among `names` (split as a shell would), else `fallback`."""
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return shlex.split(value)
    return [fallback]


class EntryActions:
    """The actions on entries of one screen.

    Args:
        host: the screen the workers run on and the notices come from.
        session: what to write with.
        rooms: the rooms the reader belongs to, as last listed (who may write where).
        done: called on the event loop after a write or delete landed (the feed re-reads).
    """

    def __init__(
        self, host: Widget, session: Session, rooms: Callable[[], list[Room]], done: Callable[[], None]
    ) -> None:
        self.host = host
        self.session = session
        self.rooms = rooms
        self.done = done

    @property
    def app(self) -> App[object]:
        return self.host.app

    def notice(self, message: str, *, title: str = "", error: bool = False) -> None:
        self.app.notify(message, title=title, severity="warning" if error else "information", markup=False)

    # -- copy ------------------------------------------------------------------------------

    def copy(self, entry: Entry, what: str) -> None:
        """Copy the short id (`id`) or the content (`content`) to the clipboard, through the terminal (OSC 52)."""
        value = short_id(entry.atom_id) if what == "id" else entry.content
        self.app.copy_to_clipboard(value)
        said = f"id {short_id(entry.atom_id)}" if what == "id" else f"the content of {short_id(entry.atom_id)}"
        # OSC 52 is a request: a terminal (or tmux without set-clipboard) may ignore it, so say both.
        self.notice(
            f"Copied {said} ({len(value)} characters) through the terminal (OSC 52). "
            "If nothing arrives, your terminal does not allow it: `mnemo show` prints it.",
            title="Copied",
        )

    # -- outside programs ------------------------------------------------------------------

    def _suspended(self, command: list[str], **run: object) -> bool:
        """Run a program with the terminal handed over to it; False (with a notice) where that cannot be."""
        try:
            with self.app.suspend():
                subprocess.run(command, check=False, **run)  # type: ignore[call-overload]
        except SuspendNotSupported:
            self.notice("This terminal cannot hand itself over to another program here.", error=True)
            return False
        except OSError as exc:
            self.notice(f"could not run {text.quoted(command[0])}: {text.line(str(exc))}", error=True)
            return False
        return True

    def page(self, entry: Entry) -> None:
        """Open the entry in `$PAGER` (`less`): its head lines, then the content as a terminal may show it."""
        head = f"{entry.atom_id}  {timefmt.to_iso(entry.created_at)}  {entry.author}  {entry.domain}\n\n"
        self._suspended(program("PAGER", fallback="less"), input=text.block(head + entry.content) + "\n", text=True)

    def _edit(self, initial: str) -> str | None:
        """What the person wrote in `$EDITOR` (`$VISUAL` first) starting from `initial`; None when nothing changed."""
        with tempfile.TemporaryDirectory(prefix="mnemo-") as folder:
            path = Path(folder) / "entry.md"
            path.write_text(initial + "\n" if initial else "", encoding="utf-8")  # a text file ends with a newline
            if not self._suspended([*program("VISUAL", "EDITOR", fallback="vi"), str(path)]):
                return None
            written = path.read_text(encoding="utf-8")
        if not written.strip() or written.rstrip("\n") == initial.rstrip("\n"):
            self.notice(NOTHING_WRITTEN)
            return None
        return written.rstrip("\n")

    def revise(self, entry: Entry) -> None:
        """Write a revision that supersedes the entry, starting from its content."""
        refusal = verbs.revise_refusal(entry)
        if refusal is not None:
            self.notice(refusal, title="Nothing written", error=True)
            return
        written = self._edit(entry.content)
        if written is not None:
            request = WriteRequest(
                content=written, domain=entry.domain, concepts=tuple(entry.concepts), supersedes=(entry.atom_id,)
            )
            self._write(request, f"Revision of {short_id(entry.atom_id)} written")

    def write(self, scope: str | None) -> None:
        """Write a new entry into the current scope (the own store's `general` when it is the own store)."""
        refusal = verbs.write_refusal(scope, self.rooms())
        if refusal is not None:
            self.notice(refusal, title="Nothing written", error=True)
            return
        written = self._edit("")
        if written is not None:
            domain = verbs.target_domain(scope)
            self._write(WriteRequest(content=written, domain=domain), f"Written to {text.line(domain)}")

    def _write(self, request: WriteRequest, said: str) -> None:
        backend = self.session.backend

        def run() -> None:
            try:
                result = backend.write(request)
            except Exception as exc:  # noqa: BLE001 - a refused write is a notice; the text is lost only if the write failed
                self.app.call_from_thread(
                    self.notice, text.line(as_error(exc).message), title="Write failed", error=True
                )
                return
            self.app.call_from_thread(self._landed, f"{said}: {short_id(result.atom_id)}")

        self.host.run_worker(run, thread=True, group="write", exit_on_error=False)

    def _landed(self, said: str) -> None:
        self.notice(said, title="Done")
        self.done()

    # -- delete ----------------------------------------------------------------------------

    def delete(self, entry: Entry) -> None:
        """Delete the entry after a confirm (`y`), by the CLI's rules: one's own entries only."""
        refusal = verbs.delete_refusal(entry)
        if refusal is not None:
            self.notice(refusal, title="Nothing deleted", error=True)
            return
        question = f"Delete {short_id(entry.atom_id)}  {text.line(headline(entry))[:60]}?"
        if entry.supersedes:
            question += f"\nThe revision it superseded ({short_id(entry.supersedes[0])}) becomes the live entry again."

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(entry)
            else:
                self.notice("nothing deleted")

        self.app.push_screen(ConfirmScreen(question), answered)

    def _delete(self, entry: Entry) -> None:
        backend = self.session.backend

        def run() -> None:
            try:
                gone = backend.delete(entry.atom_id)
            except Exception as exc:  # noqa: BLE001 - a refused delete is a notice
                self.app.call_from_thread(
                    self.notice, text.line(as_error(exc).message), title="Delete failed", error=True
                )
                return
            said = f"deleted {short_id(entry.atom_id)}" if gone else f"{short_id(entry.atom_id)} was already gone"
            self.app.call_from_thread(self._landed, said)

        self.host.run_worker(run, thread=True, group="write", exit_on_error=False)
