"""Provides the values of the rest of the memory plane: stats, a supersession chain, the concept graph, a domain wiped."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnemo_tui.values.model import Value

if TYPE_CHECKING:
    from mnemo_tui.values.model import Entry


class Stats(Value):
    """What `GET /memory/stats` counts in the caller's own store."""

    total_atoms: int
    domains: list[str]
    concept_edges: int
    avg_valence: float
    feedback: int
    fingerprints: int = 0


class Revision(Value):
    """One revision of a supersession chain."""

    entry: Entry
    is_head: bool


class Chain(Value):
    """Every revision reachable from one atom by supersession links, oldest first."""

    atom_id: str
    revisions: list[Revision]
    dangling: list[str]
    truncated: bool


class GraphEdge(Value):
    """Two concepts joined by the atoms that carry both."""

    source: str
    target: str
    weight: float
    valence: float
    count: int
    updated_at: int


class Graph(Value):
    edges: list[GraphEdge]
    truncated: bool
    min_weight_applied: float


class DomainWipe(Value):
    """What `DELETE /memory/domain/{d}` did."""

    deleted: int
    skipped_secrets: int
    left_hidden: int
