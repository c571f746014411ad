"""The sealed format and the key pair's storage: round trips, refusals, and files made 0600 without following links."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_tui.errors import AuthError, ValidationError
from mnemo_tui.state import sealing, vaultkeys
from mnemo_tui.state.config import resolve
from tests.support.keyrings import MemoryKeyring

PAIR = sealing.generate()


@given(value=st.binary(min_size=1, max_size=300))
def test_a_sealed_value_opens_with_its_pair_only(value: bytes) -> None:
    sealed = sealing.seal(PAIR.public, value, "a")
    assert sealing.unseal(PAIR, "a", sealed) == value
    assert sealing.sealed_key_id("a", sealed) == PAIR.key_id
    assert len(value) < 8 or value not in base64.b64decode(sealed)  # a byte or two may meet by chance
    with pytest.raises(AuthError, match="another key pair"):
        sealing.unseal(sealing.generate(), "a", sealed)


def test_a_value_moved_to_another_alias_is_refused() -> None:
    # Whoever holds the store can swap two sealed values between aliases: the alias sealed inside says so.
    staging = sealing.seal(PAIR.public, b"staging-token", "staging")
    with pytest.raises(AuthError, match="sealed under another alias"):
        sealing.unseal(PAIR, "prod", staging)


@given(text=st.text(min_size=1, max_size=100))
def test_every_value_0_1_could_have_stored_is_told_apart(text: str) -> None:
    legacy = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode()
    with pytest.raises(ValidationError, match="sealed without a key; add it again"):
        sealing.unseal(PAIR, "a", legacy)


def test_key_texts_round_trip_and_the_private_key_is_not_in_the_repr() -> None:
    assert sealing.pair_of(PAIR.private_text()) == PAIR
    assert sealing.public_of(PAIR.public_text()) == PAIR.public
    assert base64.b64encode(PAIR.private).decode() not in repr(PAIR)
    for bad in ("", "mnemo-key-v1:AAAA", PAIR.public_text()):
        with pytest.raises(ValidationError):
            sealing.pair_of(bad)


def test_pairs_are_kept_per_backend_in_the_keyring(memory_keyring: MemoryKeyring, tmp_path: Path) -> None:
    one = resolve(store=str(tmp_path / "one.db"))
    two = resolve(endpoint="http://127.0.0.1:1/api/v1")
    assert vaultkeys.load(one, insecure_storage=False) is None
    assert vaultkeys.save(one, PAIR.private_text(), insecure_storage=False) == ("keyring", None)
    assert vaultkeys.load(one, insecure_storage=False) == PAIR.private_text()
    assert vaultkeys.load(two, insecure_storage=False) is None
    assert set(memory_keyring.secrets) == {("mnemo", f"vault-key:{(tmp_path / 'one.db').resolve()}")}


def test_the_file_fallback_is_0600_and_never_follows_a_link(tmp_path: Path) -> None:
    settings = resolve(store=str(tmp_path / "s.db"))
    path = vaultkeys.key_file(settings)
    assert vaultkeys.save(settings, PAIR.private_text(), insecure_storage=True) == ("file", path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert vaultkeys.load(settings, insecure_storage=True) == PAIR.private_text()
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []
    target = tmp_path / "elsewhere"
    link = tmp_path / "link.key"
    os.symlink(target, link)
    with pytest.raises(ValidationError):
        vaultkeys.write_new_private(link, "x")
    assert not target.exists()
