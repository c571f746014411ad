"""Generated requests for every operation of the server's own `/openapi.json`: never a 500, always an envelope."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from mnemo_tui.values.writes import WriteRequest
from tests.support.targets import Target
from tests.support.wire import from_schema

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ENVELOPE = {"code", "message", "requestId", "retryable", "details"}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


class Served:
    def __init__(self, client: TestClient, key: str, doc: dict[str, Any]) -> None:
        self.client = client
        self.key = key
        self.doc = doc


@pytest.fixture(scope="module")
def served(module_target: Target) -> Iterator[Served]:
    store = module_target.open()
    if module_target.engine == "postgres":
        # The pool's worker thread draws from the global `random` for each connection it opens (psycopg_pool's
        # expiry jitter): growing under a write's NOTIFY while the next example draws, it looks to Hypothesis
        # like a strategy using `random`. Full before the server starts, the pool has nothing left to open.
        store.pool.resize(store.pool.max_size, store.pool.max_size)
        store.pool.wait()
    key = store.create_key("alice")[1]
    for i in range(5):
        store.write("alice", WriteRequest(content=f"note {i} about deploys", domain="ops" if i % 2 else "general"))
    store.create_room("alice", "design")
    with TestClient(module_target.app(workers=2), raise_server_exceptions=False) as client:
        yield Served(client, key, client.get("/openapi.json").json())
    store.close()


def operations() -> list[tuple[str, str]]:
    from mnemo_tui.server.app import document

    # A push follow's 200 never ends (a stream): tests/server/test_follow*.py test it over real HTTP. A HEAD
    # answers as its GET does, without a body to check.
    return [
        (path, method)
        for path, ops in document()["paths"].items()
        for method, op in ops.items()
        if method != "head" and "text/event-stream" not in op["responses"].get("200", {}).get("content", {})
    ]


def check_answer(served: Served, path: str, method: str, response: Any) -> None:
    assert response.status_code < 500, (path, method, response.status_code, response.text)
    if response.status_code == 200 and response.headers["content-type"].startswith("application/x-ndjson"):
        assert all(isinstance(json.loads(line), dict) for line in response.text.splitlines())
        return
    if response.headers["content-type"].startswith("text/plain"):  # the probes and the metrics: their own text
        assert "text/plain" in served.doc["paths"][path][method]["responses"]["200"]["content"], (path, method)
        assert path in ("/livez", "/readyz", "/metrics") and response.status_code in (200, 503), response.text
        return
    body = response.json()
    if response.status_code >= 400:
        assert isinstance(body, dict) and set(body) >= ENVELOPE, body
        return
    declared = served.doc["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    validator = Draft202012Validator({**declared, "components": served.doc["components"]})
    assert not [e.message for e in validator.iter_errors(body)], (path, method, body)


@pytest.mark.parametrize(("path", "method"), operations())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_requests_never_get_a_500_and_always_an_envelope(
    served: Served, path: str, method: str, data: st.DataObject
) -> None:
    op = served.doc["paths"][path][method]
    params = {
        p["name"]: data.draw(
            st.uuids().map(str)
            | st.text(
                st.characters(min_codepoint=33, max_codepoint=0x2FFF, blacklist_categories=("Cc", "Cs")),
                min_size=1,
                max_size=30,
            ).filter(lambda t: "/" not in t and "?" not in t and "#" not in t)
        )
        for p in op.get("parameters", [])
        if p["in"] == "path"
    }
    url = path.format(**params)
    headers = {"X-Api-Key": served.key}
    body_schema = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body_schema is None:
        response = served.client.request(method.upper(), url, headers=headers)
    else:
        body = data.draw(from_schema(body_schema, served.doc["components"]["schemas"]) | JSON_VALUES)
        response = served.client.request(method.upper(), url, json=body, headers=headers)
    check_answer(served, path, method, response)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=200), path=st.sampled_from([p for p, m in operations() if m == "post"]))
def test_arbitrary_bytes_are_refused_with_an_envelope(served: Served, raw: bytes, path: str) -> None:
    response = served.client.post(path, content=raw, headers={"X-Api-Key": served.key})
    check_answer(served, path, "post", response)
