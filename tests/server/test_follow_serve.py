"""`POST /memory/follow` against a real `mnemo serve` process: a write wakes a follower, a writer in another
process (`mnemo write` on the same store) does too, `--max-follows` bounds them, and SIGTERM ends every
stream at once with a clean stop."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.follow import client, following, write
from tests.support.serve import ServeProcess, start_serve


@pytest.fixture
def served(isolated_home: Path, cli: Any) -> Iterator[tuple[ServeProcess, str, Any]]:
    key = cli("keys", "create", "alice").stdout.strip()
    process = start_serve(isolated_home, "--max-follows", "2")
    yield process, key, cli
    if process.proc.poll() is None:
        process.proc.kill()
        process.proc.wait(timeout=10)


def test_writes_through_the_server_and_from_another_process_wake_a_follower(
    served: tuple[ServeProcess, str, Any],
) -> None:
    process, key, cli = served

    async def main() -> None:
        async with client() as c, following(c, process.url, key) as s:
            start = await s.next()
            assert start is not None and start.name == "entries" and start.ids == []
            mine = await write(c, process.url, key, "through the server")
            (woken,) = await s.until({mine})
            assert woken.ids == [mine]
            # `mnemo write` in a process of its own, on the server's store file: the change-token probe finds it.
            written = await asyncio.to_thread(cli, "write", "from another process", env={"MNEMO_PRINCIPAL": "alice"})
            assert written.code == 0, written.stderr
            other = written.stdout.strip()
            (woken,) = await s.until({other})
            assert woken.ids == [other] and woken.id is not None and start.id is not None and woken.id > start.id

    asyncio.run(main())


def test_max_follows_refuses_the_next_with_503_and_sigterm_ends_every_stream(
    served: tuple[ServeProcess, str, Any],
) -> None:
    process, key, _ = served

    async def main() -> None:
        async with client() as c, following(c, process.url, key) as one, following(c, process.url, key) as two:
            assert (await one.next()) is not None and (await two.next()) is not None
            async with following(c, process.url, key) as three:
                assert three.response.status_code == 503
                assert three.response.headers["retry-after"] == "1"
                assert b"UNAVAILABLE" in await three.response.aread()
            process.proc.send_signal(signal.SIGTERM)
            # Both streams end (no event, the body closed) without waiting for uvicorn's graceful limit.
            assert await one.next() is None and await two.next() is None

    asyncio.run(main())
    assert process.proc.wait(timeout=20) == 0
    log = "".join(process.lines)
    assert "mnemo serve: stopped" in log and "Traceback" not in log
    assert "timeout graceful shutdown exceeded" not in log  # the streams ended; uvicorn cancelled nothing
    assert log.count('"POST /api/v1/memory/follow" 200') == 2  # each stream's access line, at its end
    assert '"POST /api/v1/memory/follow" 503' in log


def test_max_follows_out_of_range_is_refused_before_serving(cli: Any) -> None:
    for bad in ("0", "100001"):
        refused = cli("serve", "--port", "0", "--max-follows", bad)
        assert refused.code == 2, refused
        assert "--max-follows must be between 1 and 100000" in refused.stderr and "Traceback" not in refused.stderr
