"""Provides `PerKey`: how many streams of one kind each key holds open at once, bounded (docs/security.md).

The push follow and the streamed walk each count theirs, so that one key cannot spend the server's
connections and starve the others; both refuse with 429, retryable, and the key frees a slot by ending a stream.
"""

from __future__ import annotations

from mnemo_tui.server.envelope import Refused


class PerKey:
    """The streams of one kind open at once, by key: at most `limit` a key, past it 429 `code` (retryable, so
    the answer carries `Retry-After`). Counted on the event loop only: no lock."""

    def __init__(self, limit: int, code: str, streams: str) -> None:
        """`streams`: what is counted, as the refusal names it ("follows", "streamed walks")."""
        self.limit = limit
        self.code = code
        self.streams = streams
        self.by_key: dict[str, int] = {}

    def take(self, key: str) -> None:
        """One more stream of `key`, or its refusal.

        Raises:
            Refused: `key` has `limit` open already (429, retryable).
        """
        held = self.by_key.get(key, 0)
        if held >= self.limit:
            raise Refused(
                429,
                self.code,
                f"this key has {self.limit} {self.streams} open already (the most one key may); close one first",
                retryable=True,
            )
        self.by_key[key] = held + 1

    def give(self, key: str) -> None:
        """A stream of `key` taken before has ended (once a stream: its `finally`)."""
        left = self.by_key[key] - 1
        if left:
            self.by_key[key] = left
        else:
            del self.by_key[key]

    def held(self, key: str) -> int:
        return self.by_key.get(key, 0)
