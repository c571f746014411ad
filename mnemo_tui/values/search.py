"""Provides the values of reading beyond the feed: a search, its hits, and one entry whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any, Literal

    from mnemo_tui.values.model import Entry


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """The arguments of one search (WIRE.md `POST /memory/read`)."""

    query: str
    scope: str | None = None
    order_by: Literal["relevance", "recency"] = "relevance"
    since: int | None = None
    until: int | None = None
    exclude_author: str | None = None
    include_history: bool = False
    top_k: int = 10
    author: str | None = None


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One search result: the entry and its relevance in [0, 1]."""

    entry: Entry
    relevance: float


@dataclass(frozen=True, slots=True)
class Detail:
    """One entry whole (`mnemo show`): its wire item plus what the feed does not carry."""

    entry: Entry
    metadata: dict[str, Any] = field(default_factory=dict)
    external_ref: str | None = None
