"""Provides `EntryActions`: what a person does to an entry from the feed — copy, page, revise, write, delete.

Each action checks the shared rules (`mnemo_tui.catchup.refusals`) first and gives a notice instead of
writing anything it may not; the outside programs (`$PAGER`, `$EDITOR`) run with the app
suspended; every write or delete goes through a thread worker, like every read.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import TypeVar

from textual.app import App, SuspendNotSupported
from textual.widget import Widget

from mnemo_tui import sanitize, timefmt
from mnemo_tui.catchup import refusals
from mnemo_tui.files import edit_text, editor_command, keep_unsent, pager_command, pager_missing
from mnemo_tui.tui.data.errors import as_error
from mnemo_tui.tui.messages import ConfirmAsked
from mnemo_tui.tui.session import Session
from mnemo_tui.tui.widgets.rows import headline, short_id
from mnemo_tui.values.model import Entry
from mnemo_tui.values.rooms import Room
from mnemo_tui.values.writes import WriteRequest

T = TypeVar("T")

# What an empty or unchanged file from the editor means: nothing is written.
NOTHING_WRITTEN = "nothing written"


class EntryActions:
    """The actions on entries of one screen.

    Args:
        host: the screen the workers run on, the notices come from and the questions bubble up from.
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

    def _suspended(self, run: Callable[[], T]) -> T | None:
        """Run an outside program with the terminal handed over to it; None (with a notice) where that cannot be."""
        try:
            with self.app.suspend():
                return run()
        except SuspendNotSupported:
            self.notice("This terminal cannot hand itself over to another program here.", error=True)
        except OSError as exc:
            self.notice(f"could not run it: {sanitize.line(str(exc))}", error=True)
        return None

    def page(self, entry: Entry) -> None:
        """Open the entry in the pager the CLI would use: its head line, then the content as a terminal may show it.

        The CLI's default, `less -FRX`, quits at once on a short text; here the app would come back
        before it could be read, so `less` stays open until `q` (and `cat` is no pager here).
        """
        command = pager_command()
        if command in ("", "cat", "less -FRX"):
            command = "less -R"
        if pager_missing(command):
            self.notice(f"the pager {sanitize.quoted(command)} could not be started (not found)", error=True)
            return
        head = f"{entry.atom_id}  {timefmt.to_iso(entry.created_at)}  {entry.author}  {entry.domain}\n\n"
        shown = sanitize.block(head + entry.content) + "\n"
        env = {**os.environ, "LESS": os.environ.get("LESS", "R").replace("F", "")}
        self._suspended(lambda: subprocess.run(command, shell=True, input=shown, text=True, env=env, check=False))

    def _edit(self, initial: str, what: str) -> str | None:
        """What the person wrote in their editor (`files.edit_text`, as `mnemo write`); None when nothing changed."""
        help_lines = [f"{what}; save and quit to store it.", "An empty or unchanged text stores nothing."]
        written = self._suspended(lambda: edit_text(initial, help_lines))
        if written is None:
            self.notice(f"the editor ({sanitize.line(editor_command())}) failed or was not found: {NOTHING_WRITTEN}")
            return None
        if not written.strip():
            self.notice(f"{NOTHING_WRITTEN}: the text was empty")
            return None
        if written.strip("\n") == initial.strip("\n"):
            self.notice(f"{NOTHING_WRITTEN}: the text was unchanged")
            return None
        return written

    def revise(self, entry: Entry) -> None:
        """Write a revision that supersedes the entry, starting from its content."""
        refusal = refusals.revise_refusal(entry)
        if refusal is not None:
            self.notice(refusal, title="Nothing written", error=True)
            return
        written = self._edit(entry.content, f"Revise {short_id(entry.atom_id)} above the scissors line")
        if written is not None:
            request = WriteRequest(
                content=written, domain=entry.domain, concepts=tuple(entry.concepts), supersedes=(entry.atom_id,)
            )
            self._write(request, f"Revision of {short_id(entry.atom_id)} written")

    def write(self, scope: str | None) -> None:
        """Write a new entry into the current scope (the own store's `general` when it is the own store)."""
        refusal = refusals.write_refusal(scope, self.rooms())
        if refusal is not None:
            self.notice(refusal, title="Nothing written", error=True)
            return
        written = self._edit(
            "", f"Write the entry for {sanitize.line(refusals.target_domain(scope))} above the scissors line"
        )
        if written is not None:
            domain = refusals.target_domain(scope)
            self._write(WriteRequest(content=written, domain=domain), f"Written to {sanitize.line(domain)}")

    def _write(self, request: WriteRequest, said: str) -> None:
        backend, state_path = self.session.backend, self.session.state_path

        def run() -> None:
            try:
                result = backend.write(request)
            except Exception as exc:  # noqa: BLE001 - a refused write is a notice, and the text is kept
                kept = keep_unsent(state_path, request.content)
                where = f"your text is kept in {kept}" if kept else "your text could not be kept"
                self.app.call_from_thread(
                    self.notice, sanitize.line(f"{as_error(exc).message}; {where}"), title="Write failed", error=True
                )
                return
            self.app.call_from_thread(self._landed, f"{said}: {short_id(result.atom_id)}")

        self.host.run_worker(run, thread=True, group="write", exit_on_error=False)

    def _landed(self, said: str) -> None:
        self.notice(said, title="Done")
        self.done()

    # -- delete ----------------------------------------------------------------------------

    def delete(self, entry: Entry) -> None:
        """Delete the entry after a confirm (`y`), by the CLI's rules: one's own, or a room's by its author or owner."""
        refusal = refusals.delete_refusal(entry, self.rooms(), refusals.reader_principal(self.session.backend))
        if refusal is not None:
            self.notice(refusal, title="Nothing deleted", error=True)
            return
        question = f"Delete {short_id(entry.atom_id)}  {sanitize.line(headline(entry))[:60]}?"
        if entry.supersedes:
            question += f"\nThe revision it superseded ({short_id(entry.supersedes[0])}) becomes the live entry again."

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(entry)
            else:
                self.notice("nothing deleted")

        self.host.post_message(ConfirmAsked(question, answered))  # the app asks it in its dialog

    def _delete(self, entry: Entry) -> None:
        backend, deleted_here = self.session.backend, self.session.deleted_here
        # Noted before the request: a push (or a poll) may bring its removal before the delete's answer.
        deleted_here.add(entry.atom_id)

        def forget() -> None:
            # A function of our own: `call_from_thread` inspects its callback's signature, which a
            # builtin (`set.discard`) has none of, so it raised in the worker and no notice came.
            deleted_here.discard(entry.atom_id)

        def run() -> None:
            try:
                gone = refusals.delete_entry(backend, entry)
            except Exception as exc:  # noqa: BLE001 - a refused delete is a notice
                self.app.call_from_thread(forget)
                self.app.call_from_thread(
                    self.notice, sanitize.line(as_error(exc).message), title="Delete failed", error=True
                )
                return
            if not gone:  # someone else removed it first: that removal did happen elsewhere
                self.app.call_from_thread(forget)
            said = f"deleted {short_id(entry.atom_id)}" if gone else f"{short_id(entry.atom_id)} was already gone"
            self.app.call_from_thread(self._landed, said)

        self.host.run_worker(run, thread=True, group="write", exit_on_error=False)
