"""Conformance with the hosted service: `mnemo serve` answers validate against its OpenAPI, and the remote backend
parses whatever those schemas allow (optional fields absent, extra fields present)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from mnemo_tui.backends.remote import RemoteBackend
from mnemo_tui.errors import (
    AuthError,
    Conflict,
    Forbidden,
    MnemoError,
    NotFound,
    PayloadTooLarge,
    Unavailable,
    ValidationError,
)
from mnemo_tui.values.model import RecentQuery
from mnemo_tui.values.search import SearchQuery
from mnemo_tui.values.writes import WriteRequest
from tests.support.targets import Target
from tests.support.wire import Canned, from_schema, serving

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


# A copy of the hosted service's schema (its published OpenAPI description) kept in the repository,
# so a clone alone runs every conformance test; refresh it when the hosted description changes.
HOSTED_PATH = Path(__file__).resolve().parents[1] / "reference" / "hosted-openapi.json"
HOSTED: dict[str, Any] = json.loads(HOSTED_PATH.read_text())


def validator(schema: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator(
        {**schema, "components": HOSTED["components"]}, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def response_schema(path: str, method: str, status: int) -> dict[str, Any]:
    responses = HOSTED["paths"]["/api/v1" + path][method]["responses"]
    declared = responses.get(str(status)) or responses["400"]  # 413 is not in the hosted description
    schema: dict[str, Any] = declared.get("content", {}).get("application/json", {}).get("schema", {})
    return schema


# -- every answer of `mnemo serve` validates ------------------------------------------------------


@pytest.fixture
def recorded(target: Target) -> Iterator[list[tuple[str, str, int, Any]]]:
    """Drive every endpoint of docs/server.md through success and failure, recording (method, path template, status, body),
    over each engine (parametrized)."""
    store = target.open()
    alice, bob = store.create_key("alice")[1], store.create_key("bob")[1]
    seen: list[tuple[str, str, int, Any]] = []
    with TestClient(target.app(workers=2), raise_server_exceptions=False) as client:

        def call(
            method: str,
            template: str,
            key: str | None,
            body: Any = None,
            extra: dict[str, str] | None = None,
            **params: str,
        ) -> Any:
            extra = extra or {}
            headers = {"X-Api-Key": key} if key else {}
            url = "/api/v1" + template.format(**params)
            response = client.request(method.upper(), url, json=body, headers={**headers, **extra})
            if response.headers["content-type"].startswith("application/x-ndjson"):
                lines = [json.loads(line) for line in response.text.splitlines()]
                seen.append((method, template, response.status_code, {"lines": lines}))
                return lines
            seen.append((method, template, response.status_code, response.json()))
            return response.json()

        old = call("post", "/memory/write", alice, {"content": "staging on Railway", "concepts": ["deploy"]})
        new = call(
            "post",
            "/memory/write",
            alice,
            {"content": "staging on Fly", "supersedes": [old["atom_id"]], "metadata": {"k": 1}, "external_ref": "r1"},
        )
        call("post", "/memory/write", alice, {"content": "again", "external_ref": "r1"})
        call("post", "/memory/write", alice, {"content": ""})
        call("post", "/memory/write", None, {"content": "x"})
        call("post", "/memory/recent", alice, {})
        call("post", "/memory/recent", alice, {"include_history": True, "limit": 1})
        call("post", "/memory/recent", alice, {"cursor": "garbage"})
        call("post", "/memory/read", alice, {"query": "staging"})
        call("post", "/memory/read", alice, {"query": "staging", "include_history": True, "order_by": "recency"})
        call("post", "/memory/read-batch", alice, {"queries": [{"query": "staging"}, {"query": "fly"}]})
        call("post", "/memory/query", alice, {"query": "staging", "domains": ["general"]})
        room = call("post", "/memory/rooms", alice, {"name": "design", "description": "d"})
        call("post", "/memory/rooms", alice, {"name": "design"})
        invite = call("post", "/memory/rooms/{room_id}/invites", alice, {"scope": "read"}, room_id=room["room_id"])
        call("post", "/memory/rooms/{room_id}/invites", bob, {}, room_id=room["room_id"])
        call("post", "/memory/rooms/join", bob, {"code": invite["code"]})
        call("post", "/memory/rooms/join", bob, {"code": invite["code"]})
        call("post", "/memory/rooms/join", bob, {"code": "mnvr_unknown"})
        call("post", "/memory/write", bob, {"content": "hi", "domain": room["address"]})
        call("get", "/memory/rooms", alice)
        call("get", "/memory/rooms", bob)
        call("post", "/vault/secrets", alice, {"alias": "db", "context": "staging", "sealed_secret_b64": "c2VjcmV0"})
        call("get", "/vault/secrets", alice)
        call("get", "/vault/secrets/by-alias/{alias}", alice, alias="db")
        call("get", "/vault/secrets/by-alias/{alias}", bob, alias="db")  # another principal's: 404
        call("get", "/vault/secrets/by-alias/{alias}", alice, alias="nope")
        call("get", "/memory/atoms/{atom_id}", alice, atom_id=new["atom_id"])
        call("get", "/memory/atoms/{atom_id}", alice, atom_id=old["atom_id"])
        call("get", "/memory/atoms/{atom_id}", bob, atom_id=new["atom_id"])
        call("get", "/memory/domains", alice)
        # The rest of the memory plane (issue 14).
        call("get", "/memory/stats", alice)
        call("get", "/memory/stats", None)
        call("post", "/memory/feedback", alice, {"atom_ids": [new["atom_id"]], "outcome": 0.5})
        call("post", "/memory/feedback", alice, {"atom_ids": ["nope"], "outcome": 2})
        batch = {"items": [{"content": "one", "concepts": ["deploy", "fly"]}, {"content": "two", "external_ref": "r1"}]}
        call("post", "/memory/write-batch", alice, batch, {"Idempotency-Key": "k1"})
        call("post", "/memory/write-batch", alice, batch, {"Idempotency-Key": "k1"})
        call("post", "/memory/write_batch", alice, {"items": [{"content": "x", "supersedes": [old["atom_id"]]}]})
        call("post", "/memory/write_batch", alice, {"items": []})
        mixed = {"items": [{"content": "three", "fingerprint": "f"}, {"content": "y", "domain": room["address"]}]}
        answer = call("post", "/memory/write_batch", bob, mixed)  # bob may only read the room
        assert [r["stored"] for r in answer["results"]] == [True, False] and answer["stored_count"] == 1
        call("post", "/memory/graph", alice, {"seeds": ["deploy"], "depth": 2})
        call("post", "/memory/graph", alice, {"seeds": []})
        call("post", "/memory/consolidate", alice, {})
        call("post", "/memory/consolidate", alice, {"domain": 3})
        call("get", "/memory/atoms/{atom_id}/chain", alice, atom_id=old["atom_id"])
        call("get", "/memory/atoms/{atom_id}/chain", bob, atom_id=old["atom_id"])
        call("get", "/memory/atoms/{atom_id}/chain", alice, atom_id="not-a-uuid")
        call("post", "/memory/atoms/by-external-ref", alice, {"external_ref": "r1"})
        call("post", "/memory/atoms/by-external-ref", alice, {"external_ref": "nope"})
        call("post", "/memory/atoms/by-external-ref", alice, {})
        call("get", "/memory/rooms/{room_id}/invites", alice, room_id=room["room_id"])
        call("get", "/memory/rooms/{room_id}/invites", bob, room_id=room["room_id"])
        call("post", "/memory/read", alice, {"query": "staging", "concepts": ["deploy"], "fingerprint": "f"})
        call("post", "/memory/query", alice, {"query": "staging", "metadata_filter": [{"key": "k", "value": 1}]})
        call("get", "/memory/export", alice)
        call("delete", "/memory/domain/{domain}", alice, domain="elsewhere")
        call("delete", "/memory/reset", alice)
        call("get", "/ready", None)
        call("get", "/health/ready", None)
        call("delete", "/memory/atoms/{atom_id}", alice, atom_id=new["atom_id"])
        call("delete", "/memory/domain/{domain}", alice, domain="general")
        call("get", "/health", None)
        yield seen
    store.close()


def test_every_answer_of_mnemo_serve_validates_against_the_hosted_schemas(
    recorded: list[tuple[str, str, int, Any]],
) -> None:
    statuses = set()
    for method, template, status, body in recorded:
        schema = response_schema(template, method, status)
        errors = [e.message for e in validator(schema).iter_errors(body)]
        assert not errors, (method, template, status, body, errors)
        if status >= 400:
            envelope = validator({"$ref": "#/components/schemas/ErrorResponseSchema"})
            assert not list(envelope.iter_errors(body)), (method, template, status, body)
        statuses.add(status)
    assert {200, 400, 401, 403, 404, 409, 422} <= statuses
    covered = {(m, t) for m, t, s, _ in recorded if s == 200}
    assert len(covered) == 29  # every endpoint of docs/server.md answered successfully at least once


def test_our_openapi_keeps_the_hosted_schemas_verbatim() -> None:
    from mnemo_tui.server.app import document

    ours = document()["components"]["schemas"]
    for name, schema in ours.items():
        if name in HOSTED["components"]["schemas"]:
            assert schema == HOSTED["components"]["schemas"][name], name


# -- the remote backend parses anything the hosted schemas allow ------------------------------------


@pytest.fixture(scope="module")
def canned() -> Iterator[tuple[Canned, RemoteBackend]]:
    app = Canned()
    with serving(app) as server:
        backend = RemoteBackend(server.url, "mk_live_" + "2" * 32, retries=0)
        yield app, backend
        backend.close()


EXTRA = st.dictionaries(st.sampled_from(["x_new_field", "episode", "score_v2"]), st.integers() | st.text(max_size=5))
FAST = settings(max_examples=25, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def generated(name: str) -> st.SearchStrategy[Any]:
    return from_schema({"$ref": f"#/components/schemas/{name}"}, HOSTED["components"]["schemas"])


def with_extras(value: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    return {**extra, **value}


@FAST
@given(body=generated("RecentResponseSchema"), extra=EXTRA)
def test_recent_pages_of_any_allowed_shape_parse(canned: tuple[Canned, RemoteBackend], body: Any, extra: Any) -> None:
    app, backend = canned
    body = with_extras(body, extra)
    body["items"] = [with_extras(i, extra) for i in body["items"]]
    app.answer(200, body)
    page = backend.recent(RecentQuery())
    assert [e.atom_id for e in page.items] == [i["atom_id"] for i in body["items"]]
    assert page.next_cursor == (body.get("next_cursor") or None)
    for entry, item in zip(page.items, body["items"], strict=True):
        wire = json.loads(entry.wire)
        assert list(wire)[:5] == ["atom_id", "content", "domain", "created_at", "concepts"]
        assert wire["content"] == item["content"] and set(wire) <= {
            "atom_id",
            "content",
            "domain",
            "created_at",
            "concepts",
            "provenance",
            "supersedes",
            "superseded_by",
        }


@FAST
@given(body=generated("ReadResponseSchema"), extra=EXTRA)
def test_search_answers_of_any_allowed_shape_parse(canned: tuple[Canned, RemoteBackend], body: Any, extra: Any) -> None:
    app, backend = canned
    app.answer(200, with_extras(body, extra))
    hits = backend.search(SearchQuery(query="anything"))
    assert [h.entry.atom_id for h in hits] == [i["atom_id"] for i in body["items"]]
    assert [h.relevance for h in hits] == [float(i["relevance"]) for i in body["items"]]


@FAST
@given(
    rooms_body=st.lists(generated("RoomListItemSchema"), max_size=4),
    created=generated("RoomCreatedSchema"),
    joined=generated("JoinedRoomSchema"),
    secrets=generated("ListSecretsResponse"),
    added=generated("CreateSecretResponse"),
    sealed=generated("SealedSecretResponse"),
    detail=generated("AtomDetailSchema"),
)
def test_room_vault_and_atom_answers_of_any_allowed_shape_parse(
    canned: tuple[Canned, RemoteBackend],
    rooms_body: Any,
    created: Any,
    joined: Any,
    secrets: Any,
    added: Any,
    sealed: Any,
    detail: Any,
) -> None:
    app, backend = canned
    app.answer(200, rooms_body)
    assert [r.room_id for r in backend.rooms()] == [r["room_id"] for r in rooms_body]
    app.answer(200, created)
    assert backend.create_room("x").room_id == created["room_id"]
    app.answer(200, joined)
    assert backend.join("mnvr_x").already_member == joined["already_member"]
    app.answer(200, secrets)
    assert [s.alias for s in backend.vault_list()] == [s["alias"] for s in secrets["secrets"]]
    app.answer(200, added)
    assert backend.vault_add("a", "c", "dmFsdWU=") == added["atom_id"]
    app.answer(200, sealed)
    assert backend.vault_sealed("a") == sealed["sealed_secret_b64"]
    app.answer(200, detail)
    assert backend.get("00000000-0000-4000-8000-000000000000").atom_id == detail["id"]


@FAST
@given(invite=generated("InviteCreatedSchema"), written=generated("WriteResponseSchema"))
def test_invite_and_write_answers_of_any_allowed_shape_parse(
    canned: tuple[Canned, RemoteBackend], invite: Any, written: Any
) -> None:
    app, backend = canned
    app.answer(200, invite)
    assert backend.invite("xroom:room_01ARZ3NDEKTSV4RRFFQ69G5FAV").code == invite["code"]
    app.answer(200, written)
    if written.get("atom_id"):
        assert backend.write(WriteRequest(content="x")).atom_id == written["atom_id"]
    else:
        with pytest.raises(ValidationError, match="did not store"):
            backend.write(WriteRequest(content="x"))


@FAST
@given(
    status=st.sampled_from([400, 401, 403, 404, 409, 413, 500]),
    body=generated("ErrorResponseSchema") | generated("HTTPValidationError") | st.builds(dict, detail=st.text()),
)
def test_error_answers_of_any_allowed_shape_map_to_the_project_errors(
    canned: tuple[Canned, RemoteBackend], status: int, body: Any
) -> None:
    app, backend = canned
    app.answer(status, {**body, "retryable": False} if "code" in body else body)
    with pytest.raises(MnemoError) as raised:
        backend.recent(RecentQuery())
    expected = {
        400: ValidationError,
        401: AuthError,
        403: Forbidden,
        404: NotFound,
        409: Conflict,
        413: PayloadTooLarge,
        500: Unavailable,
    }
    assert type(raised.value) is expected[status]
    assert raised.value.message
