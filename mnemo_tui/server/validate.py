"""Provides request-body checks against the OpenAPI schemas, answering as the hosted service does (a 422 flat
envelope whose `details.errors` lists every problem as `{loc, msg, type}`)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from functools import lru_cache
from importlib import resources
from typing import Any

from mnemo_tui import timefmt
from mnemo_tui.errors import MnemoError, ValidationError

Detail = dict[str, Any]


class BodyInvalid(MnemoError):
    """A body that does not match its schema: 422, the flat envelope with `details.errors` (no top-level `detail`)."""

    code = "VALIDATION_ERROR"
    status = 422
    exit_code = 2

    def __init__(self, detail: list[Detail]) -> None:
        first = detail[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "body"
        more = f" (and {len(detail) - 1} more)" if len(detail) > 1 else ""
        super().__init__(f"{where}: {first['msg']}{more}", details={"errors": detail})
        self.detail = detail


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    """The server's OpenAPI description (its component schemas are the hosted service's)."""
    text = resources.files("mnemo_tui.server").joinpath("openapi.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def schemas() -> dict[str, Any]:
    """The component schemas by name."""
    found: dict[str, Any] = document()["components"]["schemas"]
    return found


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}
_TYPE_WORDS = {
    "string": "a valid string",
    "integer": "a valid integer",
    "number": "a valid number",
    "boolean": "a valid boolean",
    "object": "a valid dictionary",
    "array": "a valid list",
    "null": "null",
}


@lru_cache(maxsize=256)
def _pattern(text: str) -> re.Pattern[str]:
    return re.compile(text)


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    if kind == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[kind])


def _format_ok(value: str, fmt: str) -> bool:
    if fmt == "date-time":
        try:
            timefmt.parse_iso(value)
        except ValidationError:
            return False
        return True
    if fmt == "uuid":
        try:
            uuid.UUID(value)
        except ValueError:
            return False
        return True
    return True


Loc = tuple[str | int, ...]
Checker = Callable[[Any, Loc], list[Detail]]
Rule = Callable[[Any, Loc], Detail | None]


@lru_cache(maxsize=64)
def _named(name: str) -> Checker:
    """The checker of a component schema, compiled once (a request body is checked by it, not by reading
    the schema), with a quick test first: what it accepts the full check accepts, so only a body it does
    not accept (a failing one, or one of an unusual shape) pays for the full check."""
    schema = schemas()[name]
    full, quick = compiled(schema), accepts(schema)
    if quick is None:
        return full

    def checker(value: Any, loc: Loc) -> list[Detail]:
        return [] if quick(value) else full(value, loc)

    return checker


# Keywords that say nothing of what a value may be.
_NOTES = frozenset({"title", "description", "default", "example", "examples", "deprecated"})


def accepts(schema: dict[str, Any]) -> Callable[[Any], bool] | None:
    """A quick test of an object schema's values, or None where it has none: one function of plain tests,
    written from the schema once and compiled, true only of a value the full check finds nothing wrong
    with (a value it is false of goes to the full check, which finds what is wrong, if anything).

    It knows the forms a body's fields take (strings, integers, numbers, booleans with bounds, arrays
    of them, free objects, any of them or null); a field of any other form, or a name the schema does
    not list, makes it false.
    """
    if set(schema) - _NOTES - {"type", "properties", "required", "additionalProperties"}:
        return None  # `anyOf`, `$ref`, `enum` and the like beside the properties: the full check only
    if schema.get("type") != "object" or not schema.get("properties"):
        return None
    lines = ["def accepts(value):", "    if type(value) is not dict:", "        return False"]
    lines.append("    for name, item in value.items():")
    tests = [(name, _quick(prop, "item")) for name, prop in schema["properties"].items()]
    known = [(name, test) for name, test in tests if test is not None]
    if not known:
        return None
    for i, (name, test) in enumerate(known):
        lines += [
            f"        {'if' if i == 0 else 'elif'} name == {name!r}:",
            f"            if not ({test}):",
            "                return False",
        ]
    lines += ["        else:", "            return False"]
    for name in schema.get("required", ()):
        lines += [f"    if {name!r} not in value:", "        return False"]
    lines.append("    return True")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)  # our own text: names as literals, numbers from the bundled schema
    found: Callable[[Any], bool] = namespace["accepts"]
    return found


def _quick(schema: dict[str, Any], x: str) -> str | None:
    """An expression true of `x` only when `x` passes `schema` (None for a form it does not know)."""
    keys = set(schema) - _NOTES
    if keys == {"anyOf"}:
        options = [_quick(option, x) for option in schema["anyOf"]]
        known = [f"({test})" for test in options if test is not None]
        return " or ".join(known) if known else None
    kind = schema.get("type")
    bounds = []
    if kind == "null" and keys == {"type"}:
        return f"{x} is None"
    if kind == "boolean" and keys == {"type"}:
        return f"type({x}) is bool"
    if kind == "string" and keys <= {"type", "minLength", "maxLength"}:
        bounds = [f"type({x}) is str", *_within(f"len({x})", schema, "minLength", "maxLength")]
    elif kind in ("integer", "number") and keys <= {"type", "minimum", "maximum"}:
        bounds = [f"type({x}) is int" if kind == "integer" else f"(type({x}) is int or type({x}) is float)"]
        bounds += _within(x, schema, "minimum", "maximum")
    elif kind == "array" and keys <= {"type", "items", "minItems", "maxItems"}:
        each = _quick(schema["items"], x + "_") if "items" in schema else "True"
        if each is None:
            return None
        bounds = [f"type({x}) is list", *_within(f"len({x})", schema, "minItems", "maxItems")]
        bounds += [f"all({each} for {x}_ in {x})"]
    elif (
        kind == "object"
        and keys <= {"type", "additionalProperties"}
        and schema.get("additionalProperties", True) is True
    ):
        return f"type({x}) is dict"
    return " and ".join(bounds) if bounds else None


def _within(measure: str, schema: dict[str, Any], low: str, high: str) -> list[str]:
    """The tests of an expression against a schema's lower and upper bound, those it has."""
    return [f"{measure} {op} {schema[key]!r}" for op, key in ((">=", low), ("<=", high)) if key in schema]


def compiled(schema: dict[str, Any]) -> Checker:
    """A schema (a subset of JSON Schema: what the hosted schemas use) as a function of (value, loc)
    returning every way the value fails it.

    The schema's keywords are read once, here: what a request pays is the checks its schema has.
    The rules, in order: `$ref`; `anyOf` (none of the other keywords beside it count); `type` and
    `enum` (each a failure on its own); then by the value's own type, every string, number or array
    bound it breaks, an array's items (when its bounds hold), an object's missing, unknown and
    failing properties.
    """
    ref = schema.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]

        def referenced(value: Any, loc: Loc) -> list[Detail]:
            return _named(name)(value, loc)  # looked up when used: a schema may refer to itself

        return referenced
    if "anyOf" in schema:
        options = [compiled(option) for option in schema["anyOf"]]

        def any_of(value: Any, loc: Loc) -> list[Detail]:
            failures = []
            for option in options:
                found = option(value, loc)
                if not found:
                    return []  # the first option that takes it: the others need not be tried
                failures.append(found)
            return min(failures, key=len)

        return any_of
    kind: str | None = schema.get("type")
    has_enum, enum = "enum" in schema, list(schema.get("enum", ()))
    strings, numbers, arrays = _string_rules(schema), _number_rules(schema), _array_rules(schema)
    items = compiled(schema["items"]) if schema.get("items") is not None else None
    props = {name: compiled(prop) for name, prop in schema.get("properties", {}).items()}
    required = tuple(schema.get("required", ()))
    extra = schema.get("additionalProperties", True)
    forbid = extra is False
    extra_check = compiled(extra) if isinstance(extra, dict) else None

    def checker(value: Any, loc: Loc) -> list[Detail]:
        if kind is not None and not _is_type(value, kind):
            return [{"type": f"{kind}_type", "loc": list(loc), "msg": f"Input should be {_TYPE_WORDS[kind]}"}]
        if has_enum and value not in enum:
            options = ", ".join(repr(v) for v in enum)
            return [{"type": "enum", "loc": list(loc), "msg": f"Input should be {options}"}]
        errors: list[Detail] = []
        if isinstance(value, str):
            _apply(strings, value, loc, errors)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            _apply(numbers, value, loc, errors)
        elif isinstance(value, list):
            _apply(arrays, value, loc, errors)
            if items is not None and not errors:
                for i, item in enumerate(value):
                    errors += items(item, (*loc, i))
        elif isinstance(value, dict):
            for name in required:
                if name not in value:
                    errors.append({"type": "missing", "loc": [*loc, name], "msg": "Field required"})
            for name, item in value.items():
                prop = props.get(name)
                if prop is not None:
                    errors += prop(item, (*loc, name))
                elif forbid:
                    errors.append(
                        {"type": "extra_forbidden", "loc": [*loc, name], "msg": "Extra inputs are not permitted"}
                    )
                elif extra_check is not None:
                    errors += extra_check(item, (*loc, name))
        return errors

    return checker


def _apply(rules: list[Rule], value: Any, loc: Loc, errors: list[Detail]) -> None:
    for rule in rules:
        found = rule(value, loc)
        if found is not None:
            errors.append(found)


def _length_rules(schema: dict[str, Any], keys: tuple[str, str], kinds: tuple[str, str], unit: str) -> list[Rule]:
    """The rules of a string's or an array's shortest and longest length (`minLength`/`maxLength`, `minItems`/`maxItems`)."""
    rules: list[Rule] = []
    if keys[0] in schema:
        low, short = schema[keys[0]], f"at least {schema[keys[0]]} {unit}"
        rules.append(lambda v, loc: _bound(loc, kinds[0], short) if len(v) < low else None)
    if keys[1] in schema:
        high, long = schema[keys[1]], f"at most {schema[keys[1]]} {unit}"
        rules.append(lambda v, loc: _bound(loc, kinds[1], long) if len(v) > high else None)
    return rules


def _string_rules(schema: dict[str, Any]) -> list[Rule]:
    rules = _length_rules(schema, ("minLength", "maxLength"), ("string_too_short", "string_too_long"), "character(s)")
    if "pattern" in schema:
        pattern, words = _pattern(schema["pattern"]), f"match pattern '{schema['pattern']}'"
        rules.append(lambda v, loc: None if pattern.search(v) else _bound(loc, "string_pattern_mismatch", words))
    if "format" in schema:
        fmt = schema["format"]
        failed = {"type": f"{fmt}_parsing", "msg": f"Input should be a valid {fmt}"}
        rules.append(
            lambda v, loc: (
                None if _format_ok(v, fmt) else {"type": failed["type"], "loc": list(loc), "msg": failed["msg"]}
            )
        )
    return rules


def _number_rules(schema: dict[str, Any]) -> list[Rule]:
    rules: list[Rule] = []
    if "minimum" in schema:
        low, words = schema["minimum"], f"greater than or equal to {_num(schema['minimum'])}"
        rules.append(lambda v, loc: _bound(loc, "greater_than_equal", words) if v < low else None)
    if "maximum" in schema:
        high, top = schema["maximum"], f"less than or equal to {_num(schema['maximum'])}"
        rules.append(lambda v, loc: _bound(loc, "less_than_equal", top) if v > high else None)
    return rules


def _array_rules(schema: dict[str, Any]) -> list[Rule]:
    return _length_rules(schema, ("minItems", "maxItems"), ("too_short", "too_long"), "item(s)")


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _bound(loc: tuple[str | int, ...], kind: str, words: str) -> Detail:
    return {
        "type": kind,
        "loc": list(loc),
        "msg": f"Input should have {words}" if "character" in words or "item" in words else f"Input should be {words}",
    }


def require(schema_name: str, value: Any) -> dict[str, Any]:
    """The body, checked against a named component schema, with the schema's defaults filled in.

    Raises:
        BodyInvalid: the body does not match (422 with the `detail` list).
    """
    errors = _named(schema_name)(value, ("body",))
    if errors:
        raise BodyInvalid(errors)
    assert isinstance(value, dict)
    filled = dict(value)
    for name, default in _defaults(schema_name):
        if name not in filled:
            filled[name] = default
    return filled


@lru_cache(maxsize=64)
def _defaults(schema_name: str) -> tuple[tuple[str, Any], ...]:
    """A component schema's properties that have a default, with it (once per schema, not per request)."""
    return tuple(
        (name, prop["default"])
        for name, prop in schemas()[schema_name].get("properties", {}).items()
        if "default" in prop
    )


def require_uuid(value: str, name: str) -> str:
    """A path parameter that must be a UUID (422 otherwise, as the hosted service answers)."""
    if not _format_ok(value, "uuid"):
        raise BodyInvalid([{"type": "uuid_parsing", "loc": ["path", name], "msg": "Input should be a valid UUID"}])
    return str(uuid.UUID(value))
