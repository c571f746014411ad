"""Provides the values of reading beyond the feed: a search, its hits, and one entry whole."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from typing import Any, Literal

    from mnemo_tui.values.model import Entry


class SearchQuery(Value):
    """The arguments of one search (docs/server.md `POST /memory/read`)."""

    query: str
    scope: str | None = None
    order_by: Literal["relevance", "recency"] = "relevance"
    since: int | None = None
    until: int | None = None
    exclude_author: str | None = None
    include_history: bool = False
    top_k: int = 10
    author: str | None = None


class SearchHit(Value):
    """One search result: the entry and its relevance in [0, 1]."""

    entry: Entry
    relevance: float


class Detail(Value):
    """One entry whole (`mnemo show`): its wire item plus what the feed does not carry."""

    entry: Entry
    # One empty dict shared by every Detail without metadata: a value is never changed after construction.
    metadata: dict[str, Any] = {}  # noqa: RUF012
    external_ref: str | None = None
