"""A push follow (`POST /memory/follow`) read line by line over real HTTP, every wait bounded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

WAIT = 20.0  # seconds any one awaited event may take at most (a loaded machine; never a timing assertion)


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
