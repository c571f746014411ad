"""Provides the server's Prometheus metrics (`GET /metrics`, docs/server.md "Operating it"): one registry an app,
so that many apps in one process (the tests) never share a count.

No label holds a principal, a key, a room, a domain or any content: a request is labelled by its method (one
of the HTTP methods, else `OTHER`), its route template (`/api/v1/memory/atoms/{atom_id}`, never the path sent;
`unrouted` for a request refused before routing or for no route) and its status.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class Served(Protocol):
    """What the metrics read of an app's state (`endpoints.Served`; named here, not imported: no cycle)."""

    follows: Any  # follow.Bounds
    walks: Any  # bounds.PerKey
    pool: Any  # pool.EnginePool


# No `_created` series beside each counter and histogram: they would double the exposition and no
# dashboard of ours reads them (a process-wide switch of prometheus_client; nothing else here uses it).
disable_created_metrics()  # type: ignore[no-untyped-call]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
UNROUTED = "unrouted"
STREAM_KINDS = ("follow", "walk", "mcp")
REFUSALS = ("408", "413", "429", "431", "503")  # the bounds' refusals (docs/security.md)
# Most answers take well under a millisecond; a stream's whole life lands in the last buckets.
SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """One app's metrics: what its middleware and pool record, and what `render` writes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.requests = Counter(
            "mnemo_http_requests", "HTTP requests answered.", ["method", "route", "code"], registry=r
        )
        self.duration = Histogram(
            "mnemo_http_request_duration_seconds",
            "Time from a request's arrival to its answer's end (a stream's whole life).",
            ["method", "route"],
            buckets=SECONDS,
            registry=r,
        )
        self.received = Counter(
            "mnemo_http_request_body_bytes", "Request body bytes received.", ["method", "route"], registry=r
        )
        self.sent = Counter(
            "mnemo_http_response_body_bytes", "Response body bytes sent.", ["method", "route"], registry=r
        )
        self.refusals = Counter(
            "mnemo_http_refusals",
            "Requests refused by a bound, by status (408, 413, 429, 431, 503).",
            ["reason"],
            registry=r,
        )
        for reason in REFUSALS:
            self.refusals.labels(reason)
        self.db_wait = Histogram(
            "mnemo_db_wait_seconds",
            "Time a job waited for a database thread.",
            buckets=SECONDS,
            registry=r,
        )
        self._children: dict[tuple[str, str, int], tuple[Any, Any, Any, Any]] = {}
        self._mcp = 0
        self._mcp_lock = threading.Lock()
        self.served: Served | None = None
        r.register(_Live(self))

    # -- what the middleware records ------------------------------------------------------------

    def request(self, method: str, route: str, status: int, seconds: float, received: int, sent: int) -> None:
        """One request answered (a stream's once it ended)."""
        children = self._children.get((method, route, status))
        if children is None:
            children = self._children_of(method, route, status)
        counted, timed, got, gave = children
        counted.inc()
        timed.observe(seconds)
        if received:
            got.inc(received)
        if sent:
            gave.inc(sent)
        if status in _REFUSED:
            self.refusals.labels(str(status)).inc()

    def _children_of(self, method: str, route: str, status: int) -> tuple[Any, Any, Any, Any]:
        shown = method if method in METHODS else "OTHER"
        children = (
            self.requests.labels(shown, route, str(status)),
            self.duration.labels(shown, route),
            self.received.labels(shown, route),
            self.sent.labels(shown, route),
        )
        if len(self._children) < 10_000:  # bounded: methods, routes and statuses are few
            self._children[(method, route, status)] = children
        return children

    def refused(self, status: int) -> None:
        """A refusal answered outside any request the app saw (the HTTP edges: 408, 431, 503; `edges.py`)."""
        if status in _REFUSED:
            self.refusals.labels(str(status)).inc()

    @staticmethod
    def route_of(scope: MutableMapping[str, Any]) -> str:
        """The template of the route that answered (`scope["route"]`, set by Starlette's router), else `unrouted`."""
        route = scope.get("route")
        path = getattr(route, "path", None)
        return _template(path) if isinstance(path, str) else UNROUTED

    # -- streams --------------------------------------------------------------------------------

    @contextmanager
    def stream(self, kind: str) -> Iterator[None]:
        """One stream of `kind` open for the block (the MCP transport calls it; follows and walks are read from
        their bounds)."""
        if kind != "mcp":
            raise ValueError(f"streams of {kind!r} are counted by their bounds")
        with self._mcp_lock:
            self._mcp += 1
        try:
            yield
        finally:
            with self._mcp_lock:
                self._mcp -= 1

    def render(self) -> bytes:
        return generate_latest(self.registry)


_REFUSED = frozenset(int(reason) for reason in REFUSALS)


@lru_cache(maxsize=256)
def _template(path: str) -> str:
    # `{atom_id:segment}` as `{atom_id}`: the convertor is the server's business, not the dashboard's.
    return _CONVERTOR.sub(r"{\1}", path)


_CONVERTOR = re.compile(r"\{(\w+):\w+\}")


class _Live(Collector):
    """What is read when `/metrics` is: the streams open by kind, and the database threads' use."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        served = self.metrics.served
        streams = GaugeMetricFamily("mnemo_open_streams", "Streams open now, by kind.", labels=["kind"])
        follows = served.follows.open if served is not None else 0
        walks = sum(served.walks.by_key.values()) if served is not None else 0
        for kind, value in zip(STREAM_KINDS, (follows, walks, self.metrics._mcp), strict=True):
            streams.add_metric([kind], value)
        yield streams
        if served is None:
            return
        pool = served.pool
        yield GaugeMetricFamily("mnemo_db_threads", "Database threads (one connection each).", value=pool.size)
        yield GaugeMetricFamily("mnemo_db_threads_busy", "Database threads running a job now.", value=pool.busy)
        yield GaugeMetricFamily("mnemo_db_jobs_queued", "Jobs waiting for a database thread.", value=pool.queued())


def wait_observer(metrics: Metrics) -> Callable[[float], None]:
    """What the pool calls with each job's wait for a thread."""
    return metrics.db_wait.observe
