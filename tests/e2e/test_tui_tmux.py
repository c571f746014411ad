"""`o`, `e` and `w` hand the terminal to `$PAGER` / `$EDITOR` (App.suspend): proven in a real terminal, tmux.

The headless driver refuses `App.suspend`, so these run `mnemo tui` itself in a tmux pane with
PAGER and EDITOR set to small recording scripts. Every wait is bounded; skipped only without tmux.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.values.model import Entry, RecentQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.cli import MNEMO

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
WAIT = 30.0  # seconds, at most, for any one thing to show up


def wait_for(what: str, ready: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout:.0f} s")
        time.sleep(0.1)


class Pane:
    """`mnemo tui` in a detached tmux session of its own (its own server socket)."""

    def __init__(self, socket: Path, env: dict[str, str]) -> None:
        self.socket = str(socket)
        self.name = "mnemo-" + uuid.uuid4().hex[:8]
        command = " ".join(f"{k}={_quote(v)}" for k, v in env.items()) + f" {_quote(MNEMO)} tui"
        self.tmux("new-session", "-d", "-s", self.name, "-x", "120", "-y", "36", command)

    def tmux(self, *args: str) -> str:
        out = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True, timeout=15, check=True)
        return out.stdout

    def screen(self) -> str:
        try:
            return self.tmux("capture-pane", "-p", "-t", self.name)
        except subprocess.CalledProcessError:
            return ""

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.name, *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=15, check=False)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    """A pager that records what it is given, and an editor that records the file and puts a line on top."""
    folder = tmp_path / "bin"
    folder.mkdir()
    pager = folder / "record-pager"
    pager.write_text('#!/bin/sh\ncat > "$RECORD/pager.txt.tmp"\nmv "$RECORD/pager.txt.tmp" "$RECORD/pager.txt"\n')
    editor = folder / "record-editor"
    # It writes its line first: what follows the scissors line of the file is dropped (files.edit_text).
    editor.write_text(
        '#!/bin/sh\ncp "$1" "$RECORD/editor-in.txt"\n'
        '{ printf "%s\\n" "$EDIT_LINE"; cat "$RECORD/editor-in.txt"; } > "$1"\n'
        'echo "$1" > "$RECORD/editor.done"\n'
    )
    for script in (pager, editor):
        script.chmod(0o755)
    return folder


@pytest.fixture
def pane(tmp_path: Path, isolated_home: Path, scripts: Path) -> Iterator[tuple[Pane, Path, LocalBackend]]:
    record = tmp_path / "record"
    record.mkdir()
    backend = LocalBackend.open(isolated_home / "store.db", "local")
    backend.write(WriteRequest(content="Deploy window: Tuesdays 14:00 UTC", domain="ops"))
    env = {
        "MNEMO_HOME": str(isolated_home),
        "MNEMO_STORE": str(isolated_home / "store.db"),
        "PAGER": str(scripts / "record-pager"),
        "EDITOR": str(scripts / "record-editor"),
        "VISUAL": "",
        "RECORD": str(record),
        "EDIT_LINE": "Revised in the test's editor",
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
    }
    tui = Pane(tmp_path / "tmux.sock", env)
    try:
        wait_for("the feed", lambda: "Deploy window" in tui.screen())
        yield tui, record, backend
    finally:
        tui.close()
        backend.close()


def newest(backend: LocalBackend) -> Entry:
    return backend.recent(RecentQuery(limit=1)).items[0]


def test_o_opens_the_entry_in_the_pager_and_the_app_comes_back(pane: tuple[Pane, Path, LocalBackend]) -> None:
    tui, record, backend = pane
    entry = newest(backend)
    tui.keys("o")
    wait_for("the pager's record", lambda: (record / "pager.txt").exists())
    paged = (record / "pager.txt").read_text()
    assert entry.atom_id in paged and "Deploy window: Tuesdays 14:00 UTC" in paged
    wait_for("the feed again", lambda: "Deploy window" in tui.screen())


def test_e_writes_a_revision_from_the_editor_that_supersedes_the_entry(pane: tuple[Pane, Path, LocalBackend]) -> None:
    tui, record, backend = pane
    old = newest(backend)
    tui.keys("e")
    wait_for("the editor's record", lambda: (record / "editor.done").exists())
    assert (record / "editor-in.txt").read_text().startswith(old.content + "\n")  # pre-filled with the content
    wait_for("the revision", lambda: newest(backend).atom_id != old.atom_id)
    revision = newest(backend)
    assert revision.content == f"Revised in the test's editor\n{old.content}"
    assert list(revision.supersedes) == [old.atom_id]
    assert revision.domain == "ops"
    assert backend.get(old.atom_id).superseded_by == revision.atom_id
    wait_for("the notice of the revision", lambda: "Revision of" in tui.screen())


def test_w_writes_a_new_entry_into_the_current_scope(pane: tuple[Pane, Path, LocalBackend]) -> None:
    tui, record, backend = pane
    before = newest(backend)
    tui.keys("w")
    wait_for("the editor's record", lambda: (record / "editor.done").exists())
    assert (record / "editor-in.txt").read_text().startswith("\n# ---")  # a new entry starts empty
    wait_for("the new entry", lambda: newest(backend).atom_id != before.atom_id)
    written = newest(backend)
    assert written.content == "Revised in the test's editor" and written.domain == "general"
    assert not written.supersedes
