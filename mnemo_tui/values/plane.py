"""Provides the values of the rest of the memory plane: stats, a supersession chain, the concept graph, a domain wiped."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnemo_tui.values.model import Entry


@dataclass(frozen=True, slots=True)
class Stats:
    """What `GET /memory/stats` counts in the caller's own store."""

    total_atoms: int
    domains: list[str]
    concept_edges: int
    avg_valence: float
    feedback: int
    fingerprints: int = 0


@dataclass(frozen=True, slots=True)
class Revision:
    """One revision of a supersession chain."""

    entry: Entry
    is_head: bool


@dataclass(frozen=True, slots=True)
class Chain:
    """Every revision reachable from one atom by supersession links, oldest first."""

    atom_id: str
    revisions: list[Revision]
    dangling: list[str]
    truncated: bool


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """Two concepts joined by the atoms that carry both."""

    source: str
    target: str
    weight: float
    valence: float
    count: int
    updated_at: int


@dataclass(frozen=True, slots=True)
class Graph:
    edges: list[GraphEdge]
    truncated: bool
    min_weight_applied: float


@dataclass(frozen=True, slots=True)
class DomainWipe:
    """What `DELETE /memory/domain/{d}` did."""

    deleted: int
    skipped_secrets: int
    left_hidden: int
