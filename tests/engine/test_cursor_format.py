"""The cursor's bytes by their plain definitions: HMAC-SHA256 over the body, the one canonical spelling.

Version 2 (issued now) carries the atom id as its text, spelled in lower-case hex; version 1 (issued
before: saved checkpoints, a client's next page) carries it as 16 bytes in URL-safe base64 and must keep
decoding. These compare the prepared-pad MAC and both canonical checks with their plain definitions.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_tui.engine import cursor as cursors
from mnemo_tui.errors import ValidationError
from mnemo_tui.values.model import RecentQuery

BOUND = cursors.binding("alice", RecentQuery())
SECRET = b"k" * 32
ATOM = "0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b"
Spelling = Callable[..., str]
BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@given(secret=st.binary(min_size=1, max_size=200), body=st.binary(max_size=100))
def test_the_mac_is_hmac_sha256(secret: bytes, body: bytes) -> None:
    assert cursors._mac(secret, body) == hmac.new(secret, body, hashlib.sha256).digest()[:16]


def _signed(secret: bytes, body: bytes) -> bytes:
    return body + hmac.new(secret, body, hashlib.sha256).digest()[:16]


def v1_cursor(secret: bytes, created_at: int, atom_id: str, *, version: int = 1, bound: bytes = BOUND) -> str:
    """A cursor as the first passes issued it: the 16 bytes of the UUID, URL-safe base64 without padding."""
    body = struct.pack(">B8sq16s", version, bound, created_at, uuid.UUID(atom_id).bytes)
    return base64.urlsafe_b64encode(_signed(secret, body)).decode().rstrip("=")


def v2_cursor(secret: bytes, created_at: int, atom_id: str, *, version: int = 2, bound: bytes = BOUND) -> str:
    """A cursor as it is issued now: the atom id's text, lower-case hex."""
    body = struct.pack(">B8sq36s", version, bound, created_at, atom_id.encode())
    return _signed(secret, body).hex()


def test_a_cursor_is_issued_as_the_plain_definition_of_version_2_and_decodes() -> None:
    text = v2_cursor(SECRET, 1_796_000_000_000_000, ATOM)
    assert len(text) == 138
    assert cursors.encode(SECRET, BOUND, 1_796_000_000_000_000, ATOM) == text
    assert cursors.decode(SECRET, BOUND, text) == (1_796_000_000_000_000, ATOM)


@given(created_at=st.integers(min_value=-(2**63), max_value=2**63 - 1), atom=st.uuids().map(str))
def test_a_version_1_cursor_issued_before_still_decodes_to_its_position(created_at: int, atom: str) -> None:
    text = v1_cursor(SECRET, created_at, atom)
    assert len(text) == 66
    assert cursors.decode(SECRET, BOUND, text) == (created_at, atom)


@pytest.mark.parametrize("spell", [v1_cursor, v2_cursor], ids=["version 1", "version 2"])
def test_a_cursor_of_either_version_is_refused_by_another_store_or_binding(spell: Spelling) -> None:
    other = cursors.binding("bob", RecentQuery())
    with pytest.raises(ValidationError, match="not issued by this store"):
        cursors.decode(b"x" * 32, BOUND, spell(SECRET, 5, ATOM))
    with pytest.raises(ValidationError, match="does not belong to this scope"):
        cursors.decode(SECRET, BOUND, spell(SECRET, 5, ATOM, bound=other))


@pytest.mark.parametrize(
    ("spell", "version"),
    [(v1_cursor, 2), (v1_cursor, 0), (v2_cursor, 1), (v2_cursor, 3)],
    ids=[
        "version 1 spelling, body 2",
        "version 1 spelling, body 0",
        "version 2 spelling, body 1",
        "version 2 spelling, body 3",
    ],
)
def test_a_signed_body_of_another_version_than_its_spelling_is_an_unknown_format(spell: Spelling, version: int) -> None:
    with pytest.raises(ValidationError, match="unknown format"):
        cursors.decode(SECRET, BOUND, spell(SECRET, 5, ATOM, version=version))


def test_a_version_2_cursor_is_read_only_in_its_own_lower_case_spelling() -> None:
    text = v2_cursor(SECRET, 5, ATOM)
    i = next(i for i, ch in enumerate(text) if ch.isalpha())
    one_upper = text[:i] + text[i].upper() + text[i + 1 :]
    spaced = text[:2] + " " + text[3:]  # the same length, one hex digit fewer to `fromhex`
    for variant in (text.upper(), one_upper, spaced, text[:-2] + " \n"):
        with pytest.raises(ValidationError, match="malformed"):
            cursors.decode(SECRET, BOUND, variant)
    assert bytes.fromhex(one_upper) == bytes.fromhex(text)  # what `fromhex` alone would let through


@pytest.mark.parametrize("last", list(BASE64URL))
def test_only_the_canonical_last_character_of_a_version_1_cursor_is_accepted(last: str) -> None:
    text = v1_cursor(SECRET, 5, ATOM)
    variant = text[:-1] + last
    raw = base64.urlsafe_b64decode(variant + "==")
    canonical = base64.urlsafe_b64encode(raw).decode().rstrip("=") == variant
    if canonical and raw == base64.urlsafe_b64decode(text + "=="):
        assert cursors.decode(SECRET, BOUND, variant) == (5, ATOM)
    else:
        with pytest.raises(ValidationError):
            cursors.decode(SECRET, BOUND, variant)


def test_every_single_character_substitution_of_a_version_1_cursor_is_refused() -> None:
    """Exhaustive over one cursor issued before: base64's spare bits in the last character included."""
    text = v1_cursor(SECRET, 1_796_000_000_000_000, str(uuid.uuid4()))
    refused = 0
    for i in range(len(text)):
        for ch in BASE64URL:
            if ch != text[i]:
                with pytest.raises(ValidationError):
                    cursors.decode(SECRET, BOUND, text[:i] + ch + text[i + 1 :])
                refused += 1
    assert refused == 66 * 63
