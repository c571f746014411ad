"""Whole-string patterns end in `\\Z`: Python's `$` also matches before a final newline, so `"e3\\n"` passed for an alias."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from starlette.requests import Request

import mnemo_tui
from mnemo_tui import limits, timefmt
from mnemo_tui.cli import cmd_atoms
from mnemo_tui.engine.sqlite.store import Store
from mnemo_tui.errors import Forbidden, ValidationError
from mnemo_tui.server import auth, envelope
from mnemo_tui.values import rooms

ROOM = "room_" + "0123456789ABCDEFGHJKMNPQRS"


@pytest.mark.parametrize(
    ("pattern", "good"),
    [
        (limits.ROOM_ID, ROOM),
        (limits.ALIAS_SHAPE, "e3"),
        (auth._KEY_SHAPE, "mk_live_" + "0" * 32),
        (envelope._REQUEST_ID, "req-1"),
        (timefmt._SPAN, "1h30m"),
        (timefmt._DATE_ONLY, "2026-12-02"),
        (timefmt._CLOCK, "12:30"),
        (cmd_atoms._PREFIX, "0a1b2c"),
    ],
    ids=["room_id", "alias", "api_key", "request_id", "span", "date", "clock", "atom_prefix"],
)
def test_each_whole_string_pattern_refuses_its_value_with_a_final_newline(pattern: re.Pattern[str], good: str) -> None:
    assert pattern.match(good)
    assert pattern.match(good + "\n") is None


def test_the_vault_refuses_an_alias_with_a_final_newline(store: Store) -> None:
    with pytest.raises(ValidationError):
        store.vault_add("alice", "e3\n", "", "c2VhbGVk")
    store.vault_add("alice", "e3", "", "c2VhbGVk")
    assert [s.alias for s in store.vault_list("alice")] == ["e3"]


def test_a_room_id_with_a_final_newline_is_no_room(store: Store) -> None:
    with pytest.raises(ValidationError):
        limits.parse_scope("xroom:" + ROOM + "\n")
    with pytest.raises(ValidationError):
        store.create_room("alice", "team", room_id=ROOM + "\n")
    with pytest.raises(Forbidden):
        rooms.room_id_of(ROOM + "\n", list)
    assert limits.parse_scope("xroom:" + ROOM) == "xroom:" + ROOM


async def _nothing() -> dict[str, object]:
    return {"type": "http.disconnect"}


@pytest.mark.parametrize(("sent", "echoed"), [(b"req-1", "req-1"), (b"req-1\n", None)])
def test_a_request_id_with_a_final_newline_is_not_echoed(sent: bytes, echoed: str | None) -> None:
    request = Request({"type": "http", "method": "GET", "path": "/", "headers": [(b"x-request-id", sent)]}, _nothing)
    assert envelope.request_id(request) == echoed


def test_no_pattern_in_the_package_ends_in_a_bare_dollar() -> None:
    """Every literal given to `re.compile` that ends in `$` is a whole-string check written the unsafe way."""
    root = Path(mnemo_tui.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("compile", "match", "search", "fullmatch")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "re"
            ):
                for arg in node.args[:1]:
                    for text in ast.walk(arg):
                        if isinstance(text, ast.Constant) and isinstance(text.value, str) and text.value.endswith("$"):
                            found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
