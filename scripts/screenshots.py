"""Provides the README's screenshots: the real app on a demo store, in its main states, as SVG (and PNG).

Run: `python scripts/screenshots.py [--out screenshots]`. PNGs are made where `rsvg-convert` exists.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from textual.pilot import Pilot

from mnemo_tui import timefmt
from mnemo_tui.backends import Backend
from mnemo_tui.backends.local import LocalBackend
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import Unavailable
from mnemo_tui.state.statedb import StateDB
from mnemo_tui.tui import MnemoApp
from mnemo_tui.values.model import Entry, Page, RecentQuery
from mnemo_tui.values.rooms import Room
from mnemo_tui.values.writes import WriteRequest

SIZE = (130, 38)
MINUTE = 60_000_000


def demo_store(path: Path, now: int) -> LocalBackend:
    """A demo-like store: `mnemo demo`'s filler when it is there, else a small one of our own."""
    store = Store(path)
    try:
        from mnemo_tui.portable import demo

        demo.fill(store, "local", 2_000, seed=7)
    except ImportError:
        texts = [
            ("build", "build-bot", "CI green on main after the cursor fix"),
            ("general", "claude-code", "Decided: watermarks are committed only after a walk ends"),
            ("research", "researcher", "FTS5 bm25 scores are negative: lower is better"),
        ]
        rows = [
            (WriteRequest(content=f"{t} (#{i})", domain=d, agent=a, agent_name=a), now - (300 - i) * 7 * MINUTE)
            for i in range(300)
            for d, a, t in [texts[i % 3]]
        ]
        store.bulk_insert([("local", r, t) for r, t in rows])
    return LocalBackend(store, "local")


class Unreachable(Backend):
    """A backend whose endpoint is down: every read raises Unavailable."""

    kind = "remote"
    identity = "http://127.0.0.1:8765/api/v1"
    principal = "local"

    def _down(self) -> None:
        raise Unavailable("cannot reach http://127.0.0.1:8765/api/v1 (connection refused)")

    def recent(self, query: RecentQuery) -> Page:
        self._down()
        raise AssertionError

    def domains(self) -> list[str]:
        self._down()
        raise AssertionError

    def rooms(self) -> list[Room]:
        self._down()
        raise AssertionError

    def get(self, atom_id: str) -> Entry:
        self._down()
        raise AssertionError

    def snapshot_wire(self, query: RecentQuery) -> Iterator[list[str]]:
        self._down()
        raise AssertionError

    def close(self) -> None:
        pass


async def settle(pilot: Pilot[None]) -> None:
    for _ in range(5):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


Step = Callable[[Pilot[None]], Awaitable[None]]


async def shoot(app: MnemoApp, name: str, out: Path, step: Step | None = None) -> Path:
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        if step is not None:
            await step(pilot)
            await settle(pilot)
        await pilot.wait_for_scheduled_animations()
        target = out / f"{name}.svg"
        target.write_text(app.export_screenshot(title=f"mnemo tui — {name.replace('-', ' ')}"))
    return target


async def main(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="mnemo-shots-"))
    now = timefmt.now_us()
    backend = demo_store(work / "demo.db", now)
    state = StateDB(work / "state.db")

    def app(**kwargs: object) -> MnemoApp:
        return MnemoApp(backend, state, clock=timefmt.now_us, poll_interval=None, **kwargs)  # type: ignore[arg-type]

    async def detail(pilot: Pilot[None]) -> None:
        await pilot.press("j", "j", "enter")

    async def marker(pilot: Pilot[None]) -> None:
        await pilot.press("j", "j", "j")
        other = LocalBackend.open(work / "demo.db", "local")
        for i in range(4):
            other.write(WriteRequest(content=f"Fresh note {i + 1} while you were reading", agent="claude-code"))
        other.close()
        assert isinstance(pilot.app, MnemoApp)
        pilot.app.feed_screen.feed.check_live()

    async def search(pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"cursor", "enter")

    async def filter_(pilot: Pilot[None]) -> None:
        await pilot.press("slash", *"flaky")

    async def help_(pilot: Pilot[None]) -> None:
        await pilot.press("question_mark")

    async def room(pilot: Pilot[None]) -> None:
        assert isinstance(pilot.app, MnemoApp)
        rooms = [i for i in pilot.app.feed_screen.scopes.items.values() if i.kind == "room"]
        if rooms:
            pilot.app.feed_screen.open_scope(rooms[0].scope)

    shots = [
        await shoot(app(), "feed", out),
        await shoot(app(), "detail", out, detail),
        await shoot(app(), "room", out, room),
        await shoot(app(), "new-marker", out, marker),
        await shoot(app(), "search", out, search),
        await shoot(app(), "filter", out, filter_),
        await shoot(app(), "help", out, help_),
    ]
    empty = LocalBackend.open(work / "empty.db", "local")
    empty.create_room("ops")
    empty.create_room("design-review")
    shots.append(await shoot(MnemoApp(empty, state, clock=timefmt.now_us, poll_interval=None), "empty-report", out))
    shots.append(await shoot(MnemoApp(Unreachable(), state, clock=timefmt.now_us, poll_interval=None), "error", out))  # type: ignore[arg-type]
    return shots


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "screenshots")
    args = parser.parse_args()
    made = asyncio.run(main(args.out))
    converter = shutil.which("rsvg-convert")
    for svg in made:
        if converter:
            subprocess.run([converter, str(svg), "-o", str(svg.with_suffix(".png"))], check=True)
        print(svg.with_suffix(".png") if converter else svg)
