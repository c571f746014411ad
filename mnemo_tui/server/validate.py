"""Provides request-body checks against the OpenAPI schemas, answering as the hosted service does (a 422 flat
envelope whose `details.errors` lists every problem as `{loc, msg, type}`)."""

from __future__ import annotations

import json
import re
import uuid
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


def check(schema: dict[str, Any], value: Any, loc: tuple[str | int, ...] = ("body",)) -> list[Detail]:
    """Every way `value` fails `schema` (a subset of JSON Schema: what the hosted schemas use)."""
    ref = schema.get("$ref")
    if ref is not None:
        return check(schemas()[ref.rsplit("/", 1)[-1]], value, loc)
    if "anyOf" in schema:
        failures = []
        for option in schema["anyOf"]:
            found = check(option, value, loc)
            if not found:
                return []  # the first option that takes it: the others need not be tried
            failures.append(found)
        return min(failures, key=len)
    errors: list[Detail] = []
    kind = schema.get("type")
    if kind is not None and not _is_type(value, kind):
        return [{"type": f"{kind}_type", "loc": list(loc), "msg": f"Input should be {_TYPE_WORDS[kind]}"}]
    if "enum" in schema and value not in schema["enum"]:
        options = ", ".join(repr(v) for v in schema["enum"])
        return [{"type": "enum", "loc": list(loc), "msg": f"Input should be {options}"}]
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(_bound(loc, "string_too_short", f"at least {schema['minLength']} character(s)"))
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(_bound(loc, "string_too_long", f"at most {schema['maxLength']} character(s)"))
        if "pattern" in schema and not _pattern(schema["pattern"]).search(value):
            errors.append(_bound(loc, "string_pattern_mismatch", f"match pattern '{schema['pattern']}'"))
        if "format" in schema and not _format_ok(value, schema["format"]):
            errors.append(
                {
                    "type": f"{schema['format']}_parsing",
                    "loc": list(loc),
                    "msg": f"Input should be a valid {schema['format']}",
                }
            )
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(_bound(loc, "greater_than_equal", f"greater than or equal to {_num(schema['minimum'])}"))
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(_bound(loc, "less_than_equal", f"less than or equal to {_num(schema['maximum'])}"))
    elif isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(_bound(loc, "too_short", f"at least {schema['minItems']} item(s)"))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(_bound(loc, "too_long", f"at most {schema['maxItems']} item(s)"))
        items = schema.get("items")
        if items is not None and not errors:
            for i, item in enumerate(value):
                errors += check(items, item, (*loc, i))
    elif isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                errors.append({"type": "missing", "loc": [*loc, name], "msg": "Field required"})
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in props:
                errors += check(props[name], item, (*loc, name))
            elif extra is False:
                errors.append({"type": "extra_forbidden", "loc": [*loc, name], "msg": "Extra inputs are not permitted"})
            elif isinstance(extra, dict):
                errors += check(extra, item, (*loc, name))
    return errors


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
    errors = check(schemas()[schema_name], value)
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
