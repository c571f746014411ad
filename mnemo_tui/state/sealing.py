"""Provides the vault's sealing on the client: PyNaCl `SealedBox` to a key pair, in a versioned format.

A sealed value, as stored and carried (`sealed_secret_b64`), is the base64 of

    MAGIC (b"\\xffMNS2") | key id (8 bytes) | SealedBox ciphertext (ephemeral public key, MAC, value)

`0xFF` never begins UTF-8 text, so a value mnemo 0.1 stored (the base64 of the plain text) is
told apart exactly. The key id (BLAKE2b-64 of the public key) names the pair a value was sealed
to, so "sealed to another key pair" is a clear refusal rather than a failed decryption.

The crypto library is imported here only, inside the functions that need it: only the vault
commands and `mnemo demo` pay for it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from mnemo_tui.errors import AuthError, ValidationError
from mnemo_tui.values.model import Value

MAGIC = b"\xffMNS2"
KEY_ID_BYTES = 8
PUBLIC_PREFIX = "mnemo-pub-v1:"
PRIVATE_PREFIX = "mnemo-key-v1:"
_KEY_BYTES = 32


def key_id(public: bytes) -> str:
    """The short name of a public key (16 hex digits), shown by every vault command."""
    return hashlib.blake2b(public, digest_size=KEY_ID_BYTES).hexdigest()


class KeyPair(Value):
    """A Curve25519 key pair; `private` is never part of its repr."""

    public: bytes
    private: bytes

    def __repr__(self) -> str:
        return f"KeyPair(public={self.public!r})"  # never the private key

    @property
    def key_id(self) -> str:
        return key_id(self.public)

    def public_text(self) -> str:
        """What `mnemo vault export-public` prints and `vault add --to` takes."""
        return PUBLIC_PREFIX + base64.b64encode(self.public).decode()

    def private_text(self) -> str:
        """What the keyring entry, the 0600 file and `vault export-key` hold (never printed)."""
        return PRIVATE_PREFIX + base64.b64encode(self.private).decode()


def generate() -> KeyPair:
    """A new random key pair."""
    from nacl.public import PrivateKey

    private = PrivateKey.generate()
    return KeyPair(public=bytes(private.public_key), private=bytes(private))


def _decode(text: str, prefix: str, what: str) -> bytes:
    text = text.strip()
    if not text.startswith(prefix):
        raise ValidationError(f"{what} must start with {prefix!r}")
    try:
        raw = base64.b64decode(text[len(prefix) :], validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != _KEY_BYTES:
        raise ValidationError(f"{what} is damaged: not {_KEY_BYTES} bytes of base64 after {prefix!r}")
    return raw


def pair_of(private_text: str) -> KeyPair:
    """The key pair a private key text (`mnemo-key-v1:...`) stands for.

    Raises:
        ValidationError: not a private key text.
    """
    from nacl.public import PrivateKey

    private = PrivateKey(_decode(private_text, PRIVATE_PREFIX, "a vault private key"))
    return KeyPair(public=bytes(private.public_key), private=bytes(private))


def public_of(public_text: str) -> bytes:
    """The public key a `mnemo-pub-v1:...` text stands for.

    Raises:
        ValidationError: not a public key text.
    """
    return _decode(public_text, PUBLIC_PREFIX, "a vault public key")


def seal(public: bytes, value: bytes, alias: str) -> str:
    """`value` sealed to `public` under `alias`, as the `sealed_secret_b64` the store and the wire carry.

    The alias is sealed with the value, so a store whose values were swapped between aliases (by
    whoever holds the store) is caught when one is opened.
    """
    from nacl.public import PublicKey, SealedBox

    box = SealedBox(PublicKey(public)).encrypt(alias.encode() + b"\0" + value)
    return base64.b64encode(MAGIC + bytes.fromhex(key_id(public)) + box).decode()


def sealed_key_id(alias: str, sealed_b64: str) -> str:
    """The key id a stored value was sealed to.

    Raises:
        ValidationError: a value stored by mnemo 0.1 (no seal: exit 2, add it again), or one that is
            not a value mnemo sealed.
    """
    try:
        raw = base64.b64decode(sealed_b64, validate=True)
    except (binascii.Error, ValueError):
        raise ValidationError(f"secret {alias!r} is not a sealed value mnemo can read; add it again") from None
    if not raw.startswith(MAGIC):
        raise ValidationError(
            f"secret {alias!r} was sealed without a key; add it again "
            "(mnemo 0.1 stored it as base64, readable by whoever holds the store)"
        )
    if len(raw) < len(MAGIC) + KEY_ID_BYTES + 48:
        raise ValidationError(f"secret {alias!r} is damaged (too short to be sealed); add it again")
    return raw[len(MAGIC) : len(MAGIC) + KEY_ID_BYTES].hex()


def unseal(pair: KeyPair, alias: str, sealed_b64: str) -> bytes:
    """The value of a secret, unsealed with `pair`.

    Raises:
        ValidationError: a 0.1 value or one mnemo did not seal (exit 2).
        AuthError: sealed to another key pair, or not opened by this one (exit 3).
    """
    sealed_to = sealed_key_id(alias, sealed_b64)
    if sealed_to != pair.key_id:
        raise AuthError(
            f"secret {alias!r} is sealed to another key pair ({sealed_to}); this machine holds {pair.key_id}. "
            "Import the pair it was sealed to with `mnemo vault import-key FILE`"
        )
    from nacl.exceptions import CryptoError
    from nacl.public import PrivateKey, SealedBox

    box = base64.b64decode(sealed_b64)[len(MAGIC) + KEY_ID_BYTES :]
    try:
        opened = SealedBox(PrivateKey(pair.private)).decrypt(box)
    except CryptoError:
        raise AuthError(
            f"secret {alias!r} does not open with key pair {pair.key_id}: it was altered or sealed to another pair"
        ) from None
    sealed_alias, _, value = opened.partition(b"\0")
    if sealed_alias != alias.encode():
        raise AuthError(
            f"secret {alias!r} holds a value sealed under another alias: the store's values were moved; "
            "do not trust it, add it again"
        )
    return value
