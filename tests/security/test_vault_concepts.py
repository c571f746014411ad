"""A vault secret's concepts take an entry's bounds (at most 256, each at most 200 characters), refused past them
naming the field, in the engine on both engines and on the wire (issue 55's leftovers)."""

from __future__ import annotations

import httpx
import pytest

from mnemo_tui.errors import ValidationError
from mnemo_tui.limits import MAX_CONCEPT, MAX_CONCEPTS
from tests.support.targets import Target

SEALED = "c2VhbGVk"  # the engine keeps the sealed blob as it is given; it never opens it

PAST = [
    (tuple(f"c{i}" for i in range(MAX_CONCEPTS + 1)), "concepts"),
    (("ok", "c" * (MAX_CONCEPT + 1)), "concepts.1"),
    (("ok", "a\x00b"), "a concept"),
]


@pytest.mark.parametrize(("concepts", "field"), PAST, ids=["too-many", "too-long", "nul"])
def test_the_engine_refuses_a_secret_whose_concepts_pass_an_entrys_bounds(
    target: Target, concepts: tuple[str, ...], field: str
) -> None:
    engine = target.open()
    try:
        with pytest.raises(ValidationError) as refused:  # stored as given before
            engine.vault_add("alice", "db", "prod db", SEALED, concepts)
        assert refused.value.status == 422 and refused.value.exit_code == 2
        assert str(refused.value).startswith(field), refused.value
        assert engine.vault_list("alice") == []  # nothing stored
        # At the bounds exactly, a secret is stored and listed with them.
        widest = tuple(f"{i:03}" + "c" * (MAX_CONCEPT - 3) for i in range(MAX_CONCEPTS))
        engine.vault_add("alice", "db", "prod db", SEALED, widest)
        assert engine.vault_list("alice")[0].concepts == widest
    finally:
        engine.close()


def test_the_wire_refuses_a_secret_whose_concepts_pass_the_bounds_with_a_422_naming_them(target: Target) -> None:
    from tests.support.wire import served_store

    engine = target.open()
    key = engine.create_key("alice")[1]
    try:
        with served_store(target) as server, httpx.Client(base_url=server.url, headers={"X-Api-Key": key}) as http:
            base = {"alias": "db", "context": "prod db", "sealed_secret_b64": SEALED}
            for concepts, field in (
                ([f"c{i}" for i in range(MAX_CONCEPTS + 1)], "concepts"),
                (["ok", "c" * (MAX_CONCEPT + 1)], "concepts.1"),
            ):
                answer = http.post("/vault/secrets", json=base | {"concepts": concepts})
                assert answer.status_code == 422, answer.text
                assert field in answer.json()["message"], answer.text
            assert http.get("/vault/secrets").json()["secrets"] == []
            stored = http.post("/vault/secrets", json=base | {"concepts": ["c" * MAX_CONCEPT] * MAX_CONCEPTS})
            assert stored.status_code == 200, stored.text
    finally:
        engine.close()
