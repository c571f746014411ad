"""Tests of the request-body checks: the quick test of a body never accepts what the full check refuses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_tui.server import validate
from mnemo_tui.server.validate import BodyInvalid, accepts, compiled, require, schemas

# Values at and around every bound the schemas use, of every JSON type (and of the Python types a
# decoder gives: 5.0 for an integer, True for a number).
_EDGES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    5.0,
    5.5,
    99,
    100,
    101,
    1000,
    10**20,
    *["x" * n for n in (0, 1, 99, 100, 101, 255, 256, 511, 512, 513)],
    "2026-01-01T00:00:00Z",
    "123e4567-e89b-12d3-a456-426614174000",
    "xroom:r1",
]
_LEAVES = st.sampled_from(_EDGES)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(_LEAVES, min_size=30, max_size=34)
        | st.dictionaries(st.sampled_from(["a", "content", "principal"]), inner, max_size=3)
    ),
    max_leaves=8,
)
_QUICK = sorted(name for name, schema in schemas().items() if accepts(schema) is not None)


def _kinds(schema: dict[str, Any]) -> set[str]:
    """The JSON types a schema names, through `anyOf` (a `$ref` names none)."""
    found = {schema["type"]} if "type" in schema else set()
    for option in schema.get("anyOf", ()):
        found |= _kinds(option)
    return found


_OF_KIND = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
}


def _bounds(schema: dict[str, Any], key: str) -> list[int]:
    """A bound's values, through `anyOf`, each with the values one either side of it."""
    found = [int(schema[key]) + d for d in (-1, 0, 1)] if key in schema else []
    for option in schema.get("anyOf", ()):
        found += _bounds(option, key)
    return found


def _near(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the types a field takes, at and around its bounds (and, now and then, any value)."""
    kinds = _kinds(schema)
    edges = [*_EDGES, *_bounds(schema, "minimum"), *_bounds(schema, "maximum")]
    edges += ["x" * max(0, n) for n in _bounds(schema, "minLength") + _bounds(schema, "maxLength")]
    fitting = [v for v in edges if any(_OF_KIND[k](v) for k in kinds if k in _OF_KIND)]
    options: list[st.SearchStrategy[Any]] = [st.sampled_from(fitting)] if fitting else []
    if "array" in kinds:
        sizes = [max(0, n) for n in _bounds(schema, "minItems") + _bounds(schema, "maxItems")] or [0, 2]
        options.append(
            st.sampled_from(sizes).flatmap(
                lambda n: st.lists(st.sampled_from(fitting or ["a"]), min_size=n, max_size=n)
            )
        )
    if "object" in kinds:
        options.append(st.dictionaries(st.sampled_from(["a", "b"]), _VALUES, max_size=3))
    return st.one_of(*options) if options else _VALUES


@st.composite
def bodies(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A schema's name and an object of mostly its own fields, with values near their bounds."""
    name = draw(st.sampled_from(_QUICK))
    props = schemas()[name].get("properties", {})
    chosen = draw(st.lists(st.sampled_from(list(props)), max_size=len(props), unique=True))
    body = {field: draw(_near(props[field]) if draw(st.integers(0, 9)) else _VALUES) for field in chosen}
    if draw(st.integers(0, 9)) == 0:
        body["not_a_field"] = draw(_VALUES)
    return name, body


def _candidates(schema: dict[str, Any]) -> list[Any]:
    """Every edge value, the values at and beside the field's own bounds, and arrays of sizes beside its bounds."""
    values = [*_EDGES, *_bounds(schema, "minimum"), *_bounds(schema, "maximum")]
    values += ["x" * max(0, n) for n in _bounds(schema, "minLength") + _bounds(schema, "maxLength")]
    sizes = [max(0, n) for n in _bounds(schema, "minItems") + _bounds(schema, "maxItems")] + [0, 1, 2]
    for item in ["a", 5, None, "x" * 600, {"a": 1}]:
        values += [[item] * n for n in sizes]
    return [*values, {}, {"a": [1]}, {"a": None}]


def test_each_fields_quick_test_accepts_only_what_its_full_check_accepts() -> None:
    accepted = refused = 0
    for name, schema in schemas().items():
        for field, prop in schema.get("properties", {}).items():
            expression = validate._quick(prop, "x")
            if expression is None:
                continue
            test = eval(f"lambda x: {expression}")  # the module's own expression
            full = compiled(prop)
            for value in _candidates(prop):
                if test(value):
                    accepted += 1
                    assert full(value, ("body", field)) == [], (name, field, value)
                else:
                    refused += 1
    assert accepted > 1000 and refused > 1000  # both sides of every bound were tried


@settings(max_examples=300)
@given(bodies())
def test_what_the_quick_test_accepts_the_full_check_accepts(case: tuple[str, dict[str, Any]]) -> None:
    name, body = case
    schema = schemas()[name]
    quick = accepts(schema)
    assert quick is not None
    full = compiled(schema)(body, ("body",))
    if quick(body):
        assert full == []
    assert validate._named(name)(body, ("body",)) == full  # the checker requests meet answers the same


def test_the_quick_test_takes_the_bodies_clients_send() -> None:
    recent, write = accepts(schemas()["RecentRequestSchema"]), accepts(schemas()["WriteRequestSchema"])
    assert recent is not None and write is not None
    assert recent({"limit": 50, "cursor": "A" * 66, "domain": None, "include_history": False})
    assert write({"content": "a note", "domain": "general", "concepts": ["a", "b"], "metadata": {"k": [1]}})
    # What it cannot vouch for goes to the full check: a wrong type, an unknown field, a bound passed.
    assert not recent({"limit": "50"}) and not recent({"limit": 50, "extra": 1}) and not recent({"limit": 101})
    assert not write({"domain": "general"})  # `content` is required


def test_a_body_the_quick_test_refuses_gets_the_full_checks_errors() -> None:
    with pytest.raises(BodyInvalid) as caught:
        require("RecentRequestSchema", {"limit": 0, "cursor": 5})
    assert [(e["loc"], e["type"]) for e in caught.value.detail] == [
        (["body", "limit"], "greater_than_equal"),
        (["body", "cursor"], "string_type"),
    ]
    assert require("RecentRequestSchema", {"limit": 5.0})["limit"] == 5.0  # 5.0 is an integer to the schema


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        # anyOf with options failing by different counts: the option with the fewest errors answers.
        ("QueryRequestSchema", {"query": "q", "domains": [1, 2, 3]}, [("null_type", ["body", "domains"])]),
        # Missing required fields first, then each field in the body's order, unknown ones included.
        (
            "WriteRequestSchema",
            {"domain": 5, "concepts": "x", "zzz": 1},
            [
                ("missing", ["body", "content"]),
                ("string_type", ["body", "domain"]),
                ("array_type", ["body", "concepts"]),
                ("extra_forbidden", ["body", "zzz"]),
            ],
        ),
        (
            "RecentRequestSchema",
            {"limit": True, "since": "not a time", "include_history": "no"},
            [
                ("integer_type", ["body", "limit"]),
                ("date-time_parsing", ["body", "since"]),
                ("boolean_type", ["body", "include_history"]),
            ],
        ),
    ],
)
def test_a_bad_body_gets_every_error_in_the_hosted_services_order(
    name: str, body: dict[str, Any], expected: list[tuple[str, list[Any]]]
) -> None:
    with pytest.raises(BodyInvalid) as caught:
        require(name, body)
    assert [(e["type"], e["loc"]) for e in caught.value.detail] == expected


@pytest.mark.parametrize(
    "beside",
    [{"anyOf": [{"required": ["b"]}]}, {"enum": [{"a": "ok"}]}, {"$ref": "#/components/schemas/JoinRoomRequestSchema"}],
)
def test_an_object_schema_with_a_keyword_beside_its_properties_gets_no_quick_test(beside: dict[str, Any]) -> None:
    # The full check honours `anyOf`, `enum` and `$ref` over the properties: a quick test of the
    # properties alone would accept what it refuses.
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, **beside}
    assert accepts(schema) is None
    assert compiled(schema)({"a": "x"}, ("body",)) != []
