"""An unexpected exception anywhere in the TUI (a widget's handler, not only the app's): the app keeps it for
`mnemo tui` and Textual closes it its own way (exit code 1, the error raised by a pilot run, nothing printed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App

import mnemo_tui.tui.app
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.cli.cmd_tui import TuiFailed, run_app
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from mnemo_tui.values.model import RecentQuery
from tests.support.tui import MINUTE, NOW, clock, req, settle

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class BrokenDetail(MnemoApp):
    """Opening an entry (enter) breaks the detail pane's handler: a widget's own message loop, not the app's."""

    CSS_PATH = str(Path(mnemo_tui.tui.app.__file__).with_name("mnemo.tcss"))

    def on_ready(self) -> None:
        def broken(entry: object) -> None:
            raise ZeroDivisionError("the detail pane broke")

        self.feed_screen.detail.show = broken  # type: ignore[method-assign]


async def test_a_pilot_run_raises_an_exception_of_a_widget_and_the_app_exits_with_code_1(
    store: Store, local: LocalBackend, state: StateDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    rung: list[App[object]] = []
    monkeypatch.setattr(App, "bell", lambda app: rung.append(app))  # Textual rings the terminal's bell on a failure
    store.bulk_insert([("local", req("one entry"), NOW - MINUTE)])
    app = BrokenDetail(local, state, clock=clock, poll_interval=None)
    with pytest.raises(ZeroDivisionError, match="the detail pane broke"):
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)
    assert isinstance(app.failure, ZeroDivisionError)
    assert app.return_code == 1 and not app.is_running
    assert rung == []  # not here: `mnemo tui` says the failure in its line
    app.failure = None
    app.bell()
    assert rung == [app]  # any other bell still rings


def test_an_exception_of_a_widget_is_exit_5_in_one_line(
    store: Store, local: LocalBackend, state: StateDB, capsys: pytest.CaptureFixture[str]
) -> None:
    store.bulk_insert([("local", req("one entry"), NOW - MINUTE)])
    entry = local.recent(RecentQuery()).items[0]

    class Selected(BrokenDetail):
        def on_ready(self) -> None:
            super().on_ready()
            feed = self.feed_screen.feed
            feed.post_message(feed.Selected(entry))  # as enter on its row: the screen shows it in the pane

    with pytest.raises(TuiFailed) as caught:
        run_app(Selected(local, state, clock=clock, poll_interval=None), debug=False, headless=True)
    assert caught.value.exit_code == 5
    assert caught.value.message == (
        "the terminal UI stopped on an internal error (ZeroDivisionError); re-run with --debug for details"
    )
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "the detail pane broke" not in out + err
