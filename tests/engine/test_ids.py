"""Atom ids are UUID4s spelled as `uuid` spells them, random, and never repeated."""

from __future__ import annotations

import uuid

from mnemo_tui.engine import ids


def test_atom_ids_are_canonical_random_uuid4s() -> None:
    made = [ids.atom_id() for _ in range(20_000)]
    assert len(set(made)) == len(made)
    for atom in made:
        parsed = uuid.UUID(atom)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == atom
    # Every position that is random takes every hex digit; the variant digit takes exactly 8, 9, a, b.
    assert {a[19] for a in made} == set("89ab") and {a[14] for a in made} == {"4"}
    assert all({a[i] for a in made} == set("0123456789abcdef") for i in (0, 9, 15, 20, 35))
