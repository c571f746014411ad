"""The JSON-RPC rules `mnemo mcp` applies to a stdin line before the SDK's reader (`agents/lines.py`), in process."""

from __future__ import annotations

import json

from mnemo_tui.agents import lines


def refusals(line: str) -> list[tuple[int, object]]:
    checked = lines.check(line)
    assert isinstance(checked, list), checked
    return [(r.code, r.request_id) for r in checked]


def test_nan_infinity_and_malformed_lines_are_parse_errors_with_id_null() -> None:
    for line in ('{"id": 1, "x": NaN}', '{"id": 1, "x": Infinity}', '{"id": 1, "x": -Infinity}', "{", "nope"):
        assert refusals(line) == [(-32700, None)]


def test_nesting_deeper_than_the_stack_is_a_parse_error_not_a_crash() -> None:
    assert refusals("[" * 100_000 + "]" * 100_000) == [(-32700, None)]
    deep = '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": ' + "[" * 700 + '"\\ud800"' + "]" * 700
    assert refusals(deep + "}}") == [(-32700, None)]  # JSON reads it; replacing its surrogate would overflow


def test_a_lone_surrogate_is_replaced_and_a_valid_pair_kept() -> None:
    checked = lines.check(
        '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": "x\\ud800y", "b": "\\ud83d\\ude00"}}'
    )
    assert not isinstance(checked, list)
    text, value = checked
    assert value["params"] == {"a": "x\ufffdy", "b": "😀"}
    assert json.loads(text) == value and "\\ud800" not in text


def test_batches_and_odd_ids_are_invalid_requests() -> None:
    batch = json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"id": "two"}, {"id": 2.5}])
    assert refusals(batch) == [(-32600, 1), (-32600, "two")]
    assert refusals("[]") == [(-32600, None)]
    for odd in ("1.5", "true", "null", "[1]"):
        assert refusals('{"jsonrpc": "2.0", "method": "ping", "id": ' + odd + "}") == [(-32600, None)]
    assert refusals('"text"') == [(-32600, None)]


def test_a_line_over_the_bound_is_refused_unread() -> None:
    assert refusals(" " * (lines.MAX_LINE + 1)) == [(-32700, None)]
