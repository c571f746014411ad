"""The published `openapi.json` tells what the server runs (issue 56): it is what `scripts/openapi.py` makes from
the routes, every route of the app is in it with its security, and the recorder of `conftest.py` (every
server test's answers against their operations' statuses) has teeth."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from starlette.routing import Route

from mnemo_tui.server.app import PUBLIC, document
from mnemo_tui.server.endpoints import Methods
from tests.server import recorder
from tests.server.recorder import undeclared
from tests.support.targets import Target

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("build_openapi", ROOT / "scripts" / "openapi.py")
assert _spec is not None and _spec.loader is not None
builder: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)
HOSTED: dict[str, Any] = json.loads((ROOT / "tests" / "reference" / "hosted-openapi.json").read_text())


def test_the_document_is_what_the_routes_make() -> None:
    made = builder.text(builder.build(document(), HOSTED))
    assert made == (ROOT / "mnemo_tui" / "server" / "openapi.json").read_text(encoding="utf-8"), (
        "openapi.json is stale: run .venv/bin/python scripts/openapi.py"
    )


def test_every_route_is_in_the_document_with_its_security(target: Target) -> None:
    app = target.app()
    try:
        served = set()
        for route in app.routes:
            if not isinstance(route, Route) or not isinstance(route.endpoint, Methods):
                continue  # a mounted app (MCP over HTTP at /mcp: docs/mcp.md describes it)
            path = route.path.replace(":segment}", "}")
            for method in route.endpoint.handlers:
                served.add((method.lower(), path))
                operation = document()["paths"][path][method.lower()]
                if path in PUBLIC:
                    assert "security" not in operation and "401" not in operation["responses"], (method, path)
                else:
                    assert operation["security"] == [{"ApiKey": []}, {"Bearer": []}], (method, path)
                    assert "401" in operation["responses"], (method, path)
                if method == "POST":
                    assert {"400", "413", "422"} <= set(operation["responses"]), (method, path)
        described = {(m, p) for p, ops in document()["paths"].items() for m in ops}
        assert described == served  # nothing described that is not served
    finally:
        app.close()


def test_what_the_hosted_description_left_out_is_declared() -> None:
    paths = document()["paths"]
    assert "422" in paths["/api/v1/memory/removals"]["post"]["responses"]
    assert "410" in paths["/api/v1/memory/removals"]["post"]["responses"]
    assert "409" in paths["/api/v1/vault/secrets"]["post"]["responses"]
    assert "delete" in paths["/api/v1/memory/rooms/{room_id}"]
    for operation in ("write_batch", "write-batch", "graph", "feedback", "consolidate"):
        assert {"413", "401"} <= set(paths[f"/api/v1/memory/{operation}"]["post"]["responses"])
    # Absolute paths: under /api/v1, or the origin's own (docs/server.md: the document, the probes, the metrics).
    assert all(
        path.startswith("/api/v1/") or path in ("/openapi.json", "/livez", "/readyz", "/metrics") for path in paths
    )


def test_the_component_schemas_are_still_the_hosted_services_own() -> None:
    ours = document()["components"]["schemas"]
    shared = set(ours) & set(HOSTED["components"]["schemas"])
    assert len(shared) >= 45
    assert all(ours[name] == HOSTED["components"]["schemas"][name] for name in shared)
    refs = builder.referenced(document()["paths"])
    assert refs <= set(ours)  # every schema an operation names is in the document


@pytest.mark.parametrize(
    ("seen", "flagged"),
    [
        ([("POST", "/api/v1/memory/write", 200), ("POST", "/api/v1/memory/write", 422)], False),
        ([("POST", "/api/v1/memory/write", 410)], True),  # a status its operation does not list
        ([("PUT", "/api/v1/memory/write", 405)], False),  # a method the path has not: 405 is the answer
        ([("PUT", "/api/v1/memory/write", 200)], True),
        ([("PUT", "/api/v1/memory/write", 401)], False),  # the key is checked before routing
        ([("GET", "/api/v1/memory/stats", 413)], True),
    ],
)
def test_the_recorder_flags_an_answer_the_document_does_not_declare(seen: list[Any], flagged: bool) -> None:
    assert bool(undeclared(seen)) is flagged


def test_the_recorder_sees_this_tests_answers(target: Target) -> None:
    with TestClient(target.app(workers=1), raise_server_exceptions=False) as client:
        client.get("/api/v1/memory/stats")  # no key: 401, declared
        client.put("/api/v1/health")  # a method the path has not: 405
        client.get("/api/v1/nowhere")  # no route: not an operation, not noted
    assert ("GET", "/api/v1/memory/stats", 401) in recorder.seen
    assert ("PUT", "/api/v1/health", 405) in recorder.seen
    assert not [seen for seen in recorder.seen if "nowhere" in seen[1]]
