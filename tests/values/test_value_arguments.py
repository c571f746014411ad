"""A value's constructor takes its fields in order, by name, or both, with the defaults after them, and refuses
too many, unknown, repeated and missing fields by name (values/model.py `Value._arguments`)."""

from __future__ import annotations

import pytest

from mnemo_tui.values.model import Value


class Pair(Value):
    left: str
    right: int = 2
    note: str | None = None


def test_fields_in_order_by_name_or_both_with_the_defaults_after_them() -> None:
    assert Pair("a", 1, "n") == Pair(left="a", right=1, note="n") == Pair("a", note="n", right=1)
    assert (Pair("a").left, Pair("a").right, Pair("a").note) == ("a", 2, None)
    assert Pair(note="n", left="a") == Pair("a", 2, "n")


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (("a", 1, "n", "x"), {}, "Pair takes at most 3 positional arguments"),
        ((), {"left": "a", "colour": "red"}, "Pair got an unknown or repeated field 'colour'"),
        (("a",), {"right": 1, "left": "b"}, "Pair got an unknown or repeated field 'left'"),
        ((), {"right": 1}, "Pair needs 'left'"),
    ],
)
def test_too_many_unknown_repeated_and_missing_fields_are_refused_by_name(
    args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError) as refused:
        Pair(*args, **kwargs)
    assert str(refused.value) == message
