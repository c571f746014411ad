"""A push follow (`POST /memory/follow`) read line by line over real HTTP, and `mnemo recent --follow` in a
subprocess; every wait bounded."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import httpx

from tests.support.cli import MNEMO

WAIT = 20.0  # seconds any one awaited event may take at most (a loaded machine; never a timing assertion)
FOLLOWER_WAIT = 60.0  # seconds a `Follower` may take at most to print what a test waits for (the same: a bound)


@dataclass
class Event:
    name: str
    id: int | None
    data: dict[str, Any]

    @property
    def ids(self) -> list[str]:
        if self.name == "entries":
            return [item["atom_id"] for item in self.data["items"]]
        if self.name == "removed":
            return [item["atom_id"] for item in self.data["removed"]]
        return []


@dataclass
class Stream:
    response: httpx.Response
    retry: int | None = None
    events: list[Event] = field(default_factory=list)
    ended: bool = False

    def __post_init__(self) -> None:
        self._lines = self.response.aiter_lines()

    async def _line(self, deadline: float) -> str | None:
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            raise TimeoutError("no event in time")
        try:
            return await asyncio.wait_for(anext(self._lines), left)
        except StopAsyncIteration:
            self.ended = True
            return None

    async def next(self, wait: float = WAIT) -> Event | None:
        """The next event (None once the stream ended), its lines as the server sent them."""
        deadline = asyncio.get_running_loop().time() + wait
        name, ident, data = "message", None, []
        seen = False
        while True:
            line = await self._line(deadline)
            if line is None:
                return None
            if line == "":
                if seen:
                    found = Event(name, ident, json.loads("\n".join(data)) if data else {})
                    self.events.append(found)
                    return found
                continue
            seen = True
            key, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if key == "retry":
                self.retry = int(value)
                seen = bool(data)
            elif key == "event":
                name = value
            elif key == "id":
                ident = int(value)
            elif key == "data":
                data.append(value)

    async def until(self, wanted: set[str], wait: float = WAIT) -> list[Event]:
        """Events until every id of `wanted` arrived (entries or removals), in the order they came."""
        got: list[Event] = []
        left = set(wanted)
        deadline = asyncio.get_running_loop().time() + wait  # heartbeats must not keep it waiting for ever
        while left:
            found = await self.next(max(0.0, deadline - asyncio.get_running_loop().time()))
            if found is None:
                raise AssertionError(f"the stream ended with {sorted(left)} still missing")
            got.append(found)
            left -= set(found.ids)
        return got


@asynccontextmanager
async def following(
    client: httpx.AsyncClient, url: str, key: str, body: dict[str, Any] | None = None, last_id: Any = None
) -> AsyncIterator[Stream]:
    headers = {"X-Api-Key": key}
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    async with client.stream("POST", url + "/memory/follow", json=body or {}, headers=headers) as response:
        yield Stream(response)


def client() -> httpx.AsyncClient:
    # The stream's own bound is each `next`'s wait; a request's is this.
    return httpx.AsyncClient(timeout=httpx.Timeout(WAIT, read=None))


async def write(c: httpx.AsyncClient, url: str, key: str, content: str, domain: str | None = None) -> str:
    body: dict[str, Any] = {"content": content}
    if domain is not None:
        body["domain"] = domain
    answer = await c.post(url + "/memory/write", json=body, headers={"X-Api-Key": key})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["atom_id"])


async def delete(c: httpx.AsyncClient, url: str, key: str, atom: str) -> None:
    answer = await c.delete(url + f"/memory/atoms/{atom}", headers={"X-Api-Key": key})
    assert answer.status_code == 200 and answer.json()["deleted"] == 1, answer.text


class Follower:
    """`mnemo recent --follow --format ndjson` in a subprocess; what it prints and says is gathered by threads.

    Its environment is the test's own without any `MNEMO_*` of it, then `MNEMO_HOME=home` (made if missing),
    `NO_COLOR` and `env`. As a context manager it is stopped at the end of the block (`code` and `stderr` then
    say how it ended).
    """

    def __init__(self, home: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        home.mkdir(parents=True, exist_ok=True)
        full = {k: v for k, v in os.environ.items() if not k.startswith("MNEMO_")}
        full.update(MNEMO_HOME=str(home), NO_COLOR="1", **(env or {}))
        self.proc = subprocess.Popen(
            [MNEMO, "recent", "--follow", "--format", "ndjson", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=full,
        )
        self.lines: list[str] = []  # every line printed, as printed
        self._said: list[str] = []
        assert self.proc.stdout is not None and self.proc.stderr is not None
        # stderr is read as it comes too: a live follower's is told when a wait fails, never blocked on.
        self._readers = [
            threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._pump, args=(self.proc.stderr, self._said), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self.code: int | None = None

    @classmethod
    def of(cls, home: Path, url: str, key: str, *args: str) -> Follower:
        """A follower of the endpoint `url` with the API key `key`."""
        return cls(home, *args, env={"MNEMO_ENDPOINT": url, "MNEMO_API_KEY": key})

    @staticmethod
    def _pump(stream: IO[str], into: list[str]) -> None:
        for line in stream:
            into.append(line)

    @property
    def seen(self) -> list[str]:
        """The atom ids printed so far, in the order printed."""
        return [json.loads(line)["atom_id"] for line in list(self.lines) if line.strip()]

    @property
    def stderr(self) -> str:
        """What it said on stderr so far (all of it once it ended)."""
        return "".join(self._said)

    def wait_for(
        self, condition: Callable[[], object], what: str = "printed what it should have", wait: float = FOLLOWER_WAIT
    ) -> None:
        """Until `condition()` holds, at most `wait` seconds; failing at once, with its stderr, if the follower ended."""
        deadline = time.monotonic() + wait
        while not condition():
            if self.proc.poll() is not None:
                self.proc.wait()
                self._readers[1].join(timeout=10)
                raise AssertionError(f"the follower exited {self.proc.returncode}: {self.stderr}")
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the follower never {what}: {len(self.lines)} lines printed; {self.stderr[-2000:]}"
                )
            time.sleep(0.05)

    def wait_printed(self, ids: Iterable[str], wait: float = FOLLOWER_WAIT) -> list[str]:
        """Until every id of `ids` is printed (see `wait_for`): `ids`, as a list."""
        wanted = list(ids)
        self.wait_for(lambda: set(wanted) <= set(self.seen), f"printed {len(wanted)} ids asked for", wait)
        return wanted

    def ended(self, timeout: float = 30.0) -> tuple[int, str]:
        """Wait until it exits by itself (the test's own bound: `timeout` seconds): its code and all its stderr."""
        self.code = self.proc.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=10)
        return self.code, self.stderr

    def stop(self) -> tuple[int, str]:
        """End it as ^C does (SIGINT; SIGKILL if it is still up 30 s later): its exit code and all its stderr.
        Stopping one that already ended only reports how it ended."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                return self.ended()
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.ended()

    def __enter__(self) -> Follower:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
