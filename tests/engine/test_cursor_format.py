"""The cursor's bytes are the first pass's: HMAC-SHA256 over the same body, the same canonical spelling.

Cursors issued before (saved checkpoints, a client's next page) must keep decoding; these compare the
prepared-pad MAC and the length-and-last-character canonical check with their plain definitions.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemo_tui.engine import cursor as cursors
from mnemo_tui.errors import ValidationError
from mnemo_tui.model import RecentQuery

BOUND = cursors.binding("alice", RecentQuery())


@given(secret=st.binary(min_size=1, max_size=200), body=st.binary(max_size=100))
def test_the_mac_is_hmac_sha256(secret: bytes, body: bytes) -> None:
    assert cursors._mac(secret, body) == hmac.new(secret, body, hashlib.sha256).digest()[:16]


def _plain_encode(secret: bytes, created_at: int, atom_id: str) -> str:
    body = cursors._BODY.pack(1, BOUND, created_at, bytes.fromhex(atom_id.replace("-", "")))
    raw = body + hmac.new(secret, body, hashlib.sha256).digest()[:16]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_a_cursor_spelled_by_the_plain_definition_decodes() -> None:
    secret = b"k" * 32
    atom = "0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b"
    text = _plain_encode(secret, 1_796_000_000_000_000, atom)
    assert cursors.encode(secret, BOUND, 1_796_000_000_000_000, atom) == text
    assert cursors.decode(secret, BOUND, text) == (1_796_000_000_000_000, atom)


@pytest.mark.parametrize("last", list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"))
def test_only_the_canonical_last_character_is_accepted(last: str) -> None:
    secret = b"k" * 32
    text = cursors.encode(secret, BOUND, 5, "0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b")
    variant = text[:-1] + last
    raw = base64.urlsafe_b64decode(variant + "==")
    canonical = base64.urlsafe_b64encode(raw).decode().rstrip("=") == variant
    if canonical and raw == base64.urlsafe_b64decode(text + "=="):
        assert cursors.decode(secret, BOUND, variant) == (5, "0190a3b2-7c4d-7e8f-9a0b-1c2d3e4f5a6b")
    else:
        with pytest.raises(ValidationError):
            cursors.decode(secret, BOUND, variant)
