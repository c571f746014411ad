"""The request-body models against a reference: the bundled `openapi.json` checked with `jsonschema`, plus
mnemo's documented stricter rules (docs/server.md, "Request bodies"). Generated bodies, valid and invalid,
for every operation that takes one, are accepted or refused alike by both, so the two cannot drift; each
documented difference also has a fixed example of its own."""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from mnemo_tui import timefmt
from mnemo_tui.errors import ValidationError
from mnemo_tui.server import bodies
from mnemo_tui.server.app import document
from mnemo_tui.server.bodies import BodyInvalid
from mnemo_tui.server.consumers import CommitBody
from mnemo_tui.server.removals_route import RemovalsBody

MODELS: dict[str, type[BaseModel]] = {
    "RecentRequestSchema": bodies.Recent,
    "ReadRequestSchema": bodies.Read,
    "ReadBatchRequestSchema": bodies.ReadBatch,
    "QueryRequestSchema": bodies.Query,
    "WriteRequestSchema": bodies.Write,
    "WriteBatchRequestSchema": bodies.WriteBatch,
    "CreateRoomRequestSchema": bodies.CreateRoom,
    "CreateInviteRequestSchema": bodies.CreateInvite,
    "JoinRoomRequestSchema": bodies.JoinRoom,
    "CreateSecretRequest": bodies.CreateSecret,
    "ExternalRefRequestSchema": bodies.ExternalRef,
    "FeedbackRequestSchema": bodies.Feedback,
    "ConsolidateRequestSchema": bodies.Consolidate,
    "GraphRequestSchema": bodies.Graph,
    "RemovalsRequestSchema": RemovalsBody,
    "ConsumerCommitRequestSchema": CommitBody,
}
COMPONENTS: dict[str, Any] = document()["components"]["schemas"]


def _operations() -> Iterator[tuple[str, str, str]]:
    for path, operations in document()["paths"].items():
        for method, operation in operations.items():
            if "requestBody" in operation:
                ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                yield method.upper(), path, ref.rsplit("/", 1)[-1]


def test_every_operation_with_a_body_has_its_model() -> None:
    named = {name for _, _, name in _operations()}
    assert named == set(MODELS)
    assert len(list(_operations())) == 18  # write-batch has two spellings; follow takes the feed's body


# -- the reference ---------------------------------------------------------------------------------------

H = "[0-9a-fA-F]"
_UUID = re.compile(
    rf"(urn:uuid:)?{H}{{8}}-{H}{{4}}-{H}{{4}}-{H}{{4}}-{H}{{12}}|\{{{H}{{8}}(-{H}{{4}}){{3}}-{H}{{12}}\}}|{H}{{32}}"
)


def _datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        timefmt.parse_iso(value)
    except ValidationError:
        return False
    return True


# mnemo asserts the schema's formats (JSON Schema only notes them): a date-time is what `timefmt.parse_iso`
# reads; a UUID is hyphenated, 32 hex digits, braced or `urn:uuid:` (pydantic's reading).
FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("date-time")(_datetime)
FORMATS.checks("uuid")(lambda v: not isinstance(v, str) or _UUID.fullmatch(v) is not None)


def _fullmatch(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    # The whole string: `re.search` would let `$` match before a final newline ("e3\n").
    if isinstance(instance, str) and re.fullmatch(pattern, instance) is None:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_BASE = jsonschema.Draft202012Validator


def _type(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[jsonschema.ValidationError]:
    # A number field holds a value within a float's range (10**400 is refused).
    yield from _BASE.VALIDATORS["type"](validator, types, instance, schema)
    if types == "number" and type(instance) is int and abs(instance) > _FLOAT_MAX:
        yield jsonschema.ValidationError(f"{instance} is past a float's range")


_FLOAT_MAX = int(1.7976931348623157e308)
# An integer-valued number (5.0, 1e1) is an integer, as JSON Schema's own type checker counts it.
Reference = jsonschema.validators.extend(_BASE, validators={"pattern": _fullmatch, "type": _type})


def stricter(components: dict[str, Any]) -> dict[str, Any]:
    """The component schemas with mnemo's stricter rules written in (each listed in docs/server.md)."""
    found = copy.deepcopy(components)
    found["ReadRequestSchema"]["properties"]["diversity"] = {"type": "number", "minimum": 0, "maximum": 1}
    found["FeedbackRequestSchema"]["properties"]["atom_ids"]["maxItems"] = 500
    found["GraphRequestSchema"]["properties"]["seeds"]["items"]["maxLength"] = 200
    found["WriteRequestSchema"]["properties"]["concepts"]["items"]["maxLength"] = 200
    found["CreateSecretRequest"]["properties"]["concepts"] |= {
        "maxItems": 256,
        "items": {"type": "string", "maxLength": 200},
    }
    found["WriteBatchRequestSchema"]["properties"]["items"]["items"] = {
        "allOf": [
            {"$ref": "#/components/schemas/WriteRequestSchema"},
            {"properties": {"supersedes": {"anyOf": [{"type": "null"}, {"maxItems": 0}]}}},
        ]
    }
    return found


STRICTER = stricter(COMPONENTS)


def reference(name: str) -> Any:
    return Reference(
        {"$ref": f"#/components/schemas/{name}", "components": {"schemas": STRICTER}}, format_checker=FORMATS
    )


def plain(name: str) -> Any:
    """The bundled schema as `jsonschema` reads it by default (formats noted only, patterns searched)."""
    return _BASE({"$ref": f"#/components/schemas/{name}", "components": {"schemas": COMPONENTS}})


def accepted(name: str, raw: bytes) -> bool:
    try:
        bodies.parse(MODELS[name], raw)
    except BodyInvalid:
        return False
    return True


# -- generated bodies ------------------------------------------------------------------------------------

U = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
SPECIAL = [
    "", "e3", "e3\n", "a.b-c_d", "in", "in\n", "eq", "contains", "auto", "temporal", "recency", "relevance",
    "read", "read_write", "xroom:r1", "\u00e9", "\U0001f600", "a\x00b",
    "2026-01-01T00:00:00Z", "2026-01-01T00:00:00", "2026-01-01T00:00:00+02:00", "2026-13-01T00:00:00Z", "now",
    str(U), str(U).upper(), U.hex, "{" + str(U) + "}", "urn:uuid:" + str(U), "{" + U.hex + "}", str(U) + "\n",
]  # fmt: skip
NUMBERS = [0, 1, -1, 5.0, 1e2, 0.5, -0.5, 1.5, -1.5, 10**20, 10**400, -(10**400), 1e308]
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.sampled_from(NUMBERS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
    st.sampled_from(SPECIAL),
)
JSONS = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return STRICTER[ref.rsplit("/", 1)[-1]] if ref else schema


def _sizes(low: int | None, high: int | None, inside: bool, brief: bool = False) -> list[int]:
    lo, hi = low or 0, high if high is not None else (low or 0) + 3
    near = {lo, lo + 1} if brief else {lo, lo + 1, hi - 1, hi, min(hi, 2)}
    if not inside:
        near |= {lo - 1, hi + 1}
    return sorted(n for n in near if n >= 0 and (not inside or lo <= n <= hi))


def _strings(schema: dict[str, Any], inside: bool, brief: bool) -> st.SearchStrategy[Any]:
    sizes = _sizes(schema.get("minLength"), schema.get("maxLength"), inside, brief)
    options = [] if inside and {"pattern", "format"} & set(schema) else [st.sampled_from(sizes).map(lambda n: "x" * n)]
    if not inside:
        options.append(st.sampled_from(SPECIAL))
    if "pattern" in schema:
        options.append(st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: 0 < len(s) <= 64))
    if schema.get("format") == "uuid":
        options.append(st.uuids().map(str))
    if schema.get("format") == "date-time":
        options.append(st.datetimes().map(lambda d: d.isoformat() + "Z"))
    return st.one_of(options)


def _numbers(schema: dict[str, Any], inside: bool) -> st.SearchStrategy[Any]:
    low, high = schema.get("minimum", -1000), schema.get("maximum", 1000)
    if schema["type"] == "integer":
        low, high = int(low), int(high)
    edges = [low, high]
    if not inside:
        edges += [low - 1, high + 1, low - 0.5, high + 0.5, *NUMBERS]
    ints = st.integers(low, high) if schema["type"] == "integer" else st.floats(low, high)
    return st.one_of(ints, st.sampled_from(edges))


def values(schema: dict[str, Any], inside: bool, brief: bool = False) -> st.SearchStrategy[Any]:
    """Values for `schema`: of its own kind near its bounds (`inside`: within them), now and then any value
    (`brief`: short ones, for the items of a long list)."""
    schema = _resolve(schema)
    options: list[st.SearchStrategy[Any]] = []
    for option in [*schema.get("anyOf", ()), *schema.get("allOf", ())[:1]]:
        options.append(st.deferred(lambda o=option: values(o, inside, brief)))  # type: ignore[misc]
    kind = schema.get("type")
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    elif kind == "string":
        options.append(_strings(schema, inside, brief))
    elif kind in ("integer", "number"):
        options.append(_numbers(schema, inside))
    elif kind == "boolean":
        options.append(st.booleans())
    elif kind == "null":
        options.append(st.none())
    elif kind == "array":
        each, short = values(schema.get("items", {}), inside, brief), values(schema.get("items", {}), inside, True)
        sizes = _sizes(schema.get("minItems"), schema.get("maxItems"), inside, brief)
        # A long list repeats one short value: hundreds of drawn items, or long ones, would make the test slow.
        options.append(
            st.sampled_from(sizes).flatmap(
                lambda n: st.lists(each, min_size=n, max_size=n) if n <= 3 else short.map(lambda v: [v] * n)
            )
        )
    elif kind == "object" and "properties" in schema:
        options.append(objects(schema, inside, brief))
    elif kind == "object":
        options.append(st.dictionaries(st.text(max_size=4), JSONS, max_size=3))
    if not options:
        return JSONS
    own = st.one_of(options)
    return own if inside else st.one_of(own, own, own, JSONS)


@st.composite
def objects(draw: st.DrawFn, schema: dict[str, Any], inside: bool, brief: bool = False) -> dict[str, Any]:
    """An object of mostly the schema's own fields (a required one now and then left out, an unknown one added)."""
    required = set(schema.get("required", ()))
    body = {}
    for name, prop in schema["properties"].items():
        if draw(st.integers(0, 9)) < (9 if name in required and inside else 5):
            body[name] = draw(values(prop, inside, brief))
    if not inside and draw(st.integers(0, 5)) == 0:
        body[draw(st.sampled_from(["zzz", "owner_org_id", "diversity", "principal"]))] = draw(JSONS)
    return body


def generated(name: str) -> st.SearchStrategy[Any]:
    return st.one_of(objects(STRICTER[name], True), objects(STRICTER[name], False), JSONS)


# A body each operation takes, so that every run compares an accepted body as well as refused ones.
SMALLEST: dict[str, dict[str, Any]] = {
    "RecentRequestSchema": {},
    "ReadRequestSchema": {"query": "q"},
    "ReadBatchRequestSchema": {"queries": [{"query": "q"}]},
    "QueryRequestSchema": {"query": "q"},
    "WriteRequestSchema": {"content": "c"},
    "WriteBatchRequestSchema": {"items": [{"content": "c"}]},
    "CreateRoomRequestSchema": {"name": "n"},
    "CreateInviteRequestSchema": {},
    "JoinRoomRequestSchema": {"code": "c"},
    "CreateSecretRequest": {"alias": "a", "context": "", "sealed_secret_b64": ""},
    "ExternalRefRequestSchema": {"external_ref": "r"},
    "FeedbackRequestSchema": {"atom_ids": [], "outcome": 0},
    "ConsolidateRequestSchema": {},
    "GraphRequestSchema": {"seeds": ["s"]},
    "RemovalsRequestSchema": {},
    "ConsumerCommitRequestSchema": {"position": None},
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_models_and_the_reference_accept_and_refuse_the_same_bodies(name: str) -> None:
    seen = {True: 0, False: 0}
    check = reference(name)

    @settings(
        max_examples=40,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(body=generated(name))
    @example(body=SMALLEST[name])
    @example(body=[])
    def agree(body: Any) -> None:
        raw = json.dumps(body).encode()
        expected = check.is_valid(json.loads(raw))
        assert accepted(name, raw) == expected, (body, [e.message for e in check.iter_errors(json.loads(raw))])
        seen[expected] += 1

    agree()
    assert seen[True] >= 1 and seen[False] >= 1 and sum(seen.values()) > 2, seen  # both sides were compared


# -- each documented difference, on its own ----------------------------------------------------------------

DIFFERENCES = [
    # The formats are asserted: a date-time `timefmt.parse_iso` reads, a UUID in one of pydantic's spellings.
    ("RecentRequestSchema", {"since": "yesterday"}),
    ("ReadRequestSchema", {"query": "q", "until": "2026-13-01T00:00:00Z"}),
    ("FeedbackRequestSchema", {"atom_ids": ["not-a-uuid"], "outcome": 0}),
    ("WriteRequestSchema", {"content": "c", "supersedes": [str(U) + "\n"]}),
    # A pattern matches the whole string: `$` is the end of it, not before a final newline.
    ("CreateSecretRequest", {"alias": "e3\n", "context": "", "sealed_secret_b64": ""}),
    ("QueryRequestSchema", {"query": "q", "metadata_filter": [{"key": "k\n", "value": 1}]}),
    ("QueryRequestSchema", {"query": "q", "metadata_filter": [{"key": "k", "op": "in\n", "value": 1}]}),
    # mnemo's own read field: `diversity` is a number from 0 to 1.
    ("ReadRequestSchema", {"query": "q", "diversity": 2}),
    ("ReadBatchRequestSchema", {"queries": [{"query": "q", "diversity": "high"}]}),
    # At most 500 ids a feedback call.
    ("FeedbackRequestSchema", {"atom_ids": [str(U)] * 501, "outcome": 0.5}),
    # Each graph seed at most 200 characters (the schema's description says so).
    ("GraphRequestSchema", {"seeds": ["x" * 201]}),
    # Each concept of a write at most 200 characters (mnemo's own bound, the engine's too).
    ("WriteRequestSchema", {"content": "c", "concepts": ["x" * 201]}),
    ("WriteBatchRequestSchema", {"items": [{"content": "c", "concepts": ["x" * 201]}]}),
    # No `supersedes` in a write-batch item (the schema's description says so).
    ("WriteBatchRequestSchema", {"items": [{"content": "c", "supersedes": [str(U)]}]}),
    # A number within a float's range.
    ("GraphRequestSchema", {"seeds": ["a"], "min_weight": 10**400}),
]


@pytest.mark.parametrize(("name", "body"), DIFFERENCES)
def test_each_stricter_rule_refuses_what_the_bare_schema_takes(name: str, body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    assert plain(name).is_valid(json.loads(raw))
    assert not reference(name).is_valid(json.loads(raw))
    with pytest.raises(BodyInvalid) as caught:
        bodies.parse(MODELS[name], raw)
    assert caught.value.status == 422 and caught.value.detail[0]["loc"][0] == "body"


@pytest.mark.parametrize(
    "spelling", [str(U), str(U).upper(), U.hex, "{" + str(U) + "}", "urn:uuid:" + str(U), "urn:uuid:" + U.hex]
)
def test_a_uuid_is_read_in_the_spellings_the_reference_names(spelling: str) -> None:
    raw = json.dumps({"atom_ids": [spelling], "outcome": 1}).encode()
    assert accepted("FeedbackRequestSchema", raw) == reference("FeedbackRequestSchema").is_valid(json.loads(raw))


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        (b"", "missing"),  # a body is required, as the hosted service answers
        (b" \n", "missing"),
        (b'{"limit": NaN}', "json_invalid"),  # JSON has no NaN; pydantic's parser reads one
        (b'{"domain": "a", "cursor": "\\ud800"}', "string_unicode"),
        (b'{"limit": "5"}', "int_type"),  # the hosted service (lax) reads "5" as 5; the schema does not
        (b'{"include_history": 1}', "bool_type"),
        (b'{"limit": 5.5}', "int_type"),  # an integer-valued number is an integer; a fraction is not
        (b'{"limit": true}', "int_type"),
    ],
)
def test_bodies_no_schema_can_describe_are_refused_with_a_422(raw: bytes, kind: str) -> None:
    with pytest.raises(BodyInvalid) as caught:
        bodies.parse(bodies.Recent, raw)
    assert caught.value.detail[0]["type"] == kind


def test_a_body_that_is_not_json_is_a_400_and_utf16_json_is_read() -> None:
    with pytest.raises(ValidationError) as caught:
        bodies.parse(bodies.Recent, b"{")
    assert caught.value.status == 400 and not isinstance(caught.value, BodyInvalid)
    assert bodies.parse(bodies.Recent, '{"limit": 7}'.encode("utf-16")).limit == 7


def test_the_errors_are_the_flat_envelopes_list_with_the_hosted_words() -> None:
    with pytest.raises(BodyInvalid) as caught:
        bodies.parse(bodies.Write, json.dumps({"domain": 5, "concepts": "x", "zzz": 1}).encode())
    assert caught.value.detail == [
        {"type": "missing", "loc": ["body", "content"], "msg": "Field required"},
        {"type": "list_type", "loc": ["body", "concepts"], "msg": "Input should be a valid array"},
        {"type": "string_type", "loc": ["body", "domain"], "msg": "Input should be a valid string"},
        {"type": "extra_forbidden", "loc": ["body", "zzz"], "msg": "Extra inputs are not permitted"},
    ]
    envelope = caught.value.envelope(None)
    assert envelope["message"] == "content: Field required (and 3 more)" and "detail" not in envelope


# -- what clients send: integer-valued numbers and empty optional strings ----------------------------------

WHOLE = [
    (bodies.Recent, b'{"limit": 10.0}', "limit", 10),
    (bodies.Recent, b'{"limit": 1e1}', "limit", 10),
    (bodies.Read, b'{"query": "q", "top_k": 5.0}', "top_k", 5),
    (bodies.Query, b'{"query": "q", "top_k": 2E2}', "top_k", 200),
    (bodies.Graph, b'{"seeds": ["a"], "depth": 2.0, "limit": 5e0}', "depth", 2),
    (bodies.Graph, b'{"seeds": ["a"], "limit": 5e0}', "limit", 5),
    (bodies.CreateInvite, b'{"max_uses": 3.0}', "max_uses", 3),
    (bodies.CreateInvite, b'{"expires_in_days": 30.0}', "expires_in_days", 30),
]


@pytest.mark.parametrize(("model", "raw", "field", "value"), WHOLE)
def test_an_integer_valued_number_is_read_as_the_integer_it_is(
    model: type[BaseModel], raw: bytes, field: str, value: int
) -> None:
    read = getattr(bodies.parse(model, raw), field)
    assert read == value and type(read) is int


@pytest.mark.parametrize(
    "raw", [b'{"limit": 10.5}', b'{"limit": 1e-1}', b'{"limit": "10"}', b'{"limit": 0.0}', b'{"limit": 1e3}']
)
def test_a_fraction_a_string_or_a_number_out_of_bounds_is_still_refused(raw: bytes) -> None:
    with pytest.raises(BodyInvalid) as caught:
        bodies.parse(bodies.Recent, raw)
    assert caught.value.detail[0]["loc"] == ["body", "limit"]


@pytest.mark.parametrize(
    ("model", "raw", "field"),
    [
        (bodies.Write, b'{"content": "c", "fingerprint": ""}', "fingerprint"),
        (bodies.Write, b'{"content": "c", "external_ref": ""}', "external_ref"),
        (bodies.Read, b'{"query": "q", "fingerprint": ""}', "fingerprint"),
        (bodies.ReadBatch, b'{"queries": [{"query": "q", "fingerprint": ""}]}', "queries"),
    ],
)
def test_an_empty_fingerprint_or_external_ref_is_absent(model: type[BaseModel], raw: bytes, field: str) -> None:
    read = bodies.parse(model, raw)
    if field == "queries":
        assert read.queries[0].fingerprint is None  # type: ignore[attr-defined]
    else:
        assert getattr(read, field) is None
    assert reference(_NAMES[model]).is_valid(json.loads(raw))  # the schema takes "" too


_NAMES = {model: name for name, model in MODELS.items()}
