"""The bounds of `/mcp`'s feed subscriptions (`mcp_mount.Subscriptions`), as the follows': past a key's 429,
past the server's 503, both retryable (`Retry-After`); a refused take holds nothing."""

from __future__ import annotations

import pytest

from mnemo_tui.errors import MnemoError
from mnemo_tui.server.mcp_mount import Subscriptions, refusal


def test_the_servers_bounds_refuse_past_a_key_429_and_past_the_server_503_both_retryable() -> None:
    bounds = Subscriptions(max_subscriptions=3, per_key=2)
    bounds.take("k1")
    bounds.take("k1")
    with pytest.raises(MnemoError) as per_key:
        bounds.check("k1")
    assert per_key.value.status == 429 and per_key.value.code == "TOO_MANY_SUBSCRIPTIONS"
    bounds.take("k2")
    with pytest.raises(MnemoError) as server:
        bounds.take("k3")
    assert server.value.status == 503
    for refused in (per_key.value, server.value):
        answer = refusal(refused)
        assert answer.status_code == refused.status and answer.headers["retry-after"] == "1"
    assert bounds.open == 3 and bounds.keys.held("k3") == 0  # the refused take held nothing
    bounds.give("k1")
    bounds.take("k3")
