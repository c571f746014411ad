"""A feed subscription's outbox in process: a listener that takes no notification is cut at the send deadline,
and each pending URI goes once, in order (the server's bounds: tests/server/test_mcp_subscription_bounds.py)."""

from __future__ import annotations

import asyncio

import pytest

from mnemo_tui.agents import subscriptions
from mnemo_tui.agents.subscriptions import Outbox


def test_a_listener_that_takes_nothing_is_cut_at_the_send_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subscriptions, "SEND_SECONDS", 0.01)
    sent: list[str] = []

    async def main() -> bool:
        outbox = Outbox("k", "p")
        never = asyncio.Event()

        async def stuck(uri: str) -> None:
            sent.append(uri)
            await never.wait()  # a client that stopped reading: the write never completes

        outbox.put("memory://feed")
        outbox.put("memory://feed")  # a level trigger: once
        outbox.put("memory://feed/b")
        return await outbox.pump(stuck)

    assert asyncio.run(main()) is False
    assert sent == ["memory://feed"]


def test_a_pump_sends_each_pending_uri_once_in_order_and_ends_when_told() -> None:
    async def main() -> list[str]:
        outbox = Outbox("k", "p")
        sent: list[str] = []

        async def send(uri: str) -> None:
            sent.append(uri)
            if len(sent) == 2:
                outbox.end()

        for uri in ("a", "b", "a", "c"):
            outbox.put(uri)
        assert await outbox.pump(send) is True
        return sent

    assert asyncio.run(main()) == ["a", "b"]
