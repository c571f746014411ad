"""Provides the server's Prometheus metrics (`GET /metrics`, docs/server.md "Operating it"): one registry an app,
so that many apps in one process (the tests) never share a count.

No label holds a principal, a key, a room, a domain or any content: a request is labelled by its method (one
of the HTTP methods, else `OTHER`), its route template (`/api/v1/memory/atoms/{atom_id}`, never the path sent;
`unrouted` for a request refused before routing or for no route) and its status.

Why the requests are counted in plain numbers rather than in `prometheus_client.Counter`s: they are counted
on the event loop only, where a lock is not needed, and a counter's `inc` and a histogram's `observe` (a lock
and checks each) cost 13 µs a request here, a few percent of the server's rate; `_Live` hands the numbers
to the registry when it is read. The database threads' wait, observed from several threads, is a
`prometheus_client.Histogram`.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


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
REFUSALS = (408, 413, 429, 431, 503)  # the bounds' refusals (docs/security.md)
# Most answers take well under a millisecond; a stream's whole life lands in the last buckets.
SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BOUNDS = [floatToGoString(b) for b in SECONDS] + ["+Inf"]  # type: ignore[no-untyped-call]
MAX_SERIES = 10_000  # bounded: methods, routes and statuses are few


class _Series:
    """The requests of one method, route and status: how many, their time by bucket, their bytes."""

    __slots__ = ("buckets", "count", "got", "seconds", "sent")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(SECONDS) + 1)  # not cumulative; the last is past every bound
        self.got = self.sent = 0


class Metrics:
    """One app's metrics: what its middleware and pool record, and what `render` writes."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.db_wait = Histogram(
            "mnemo_db_wait_seconds",
            "Time a job waited for a database thread.",
            buckets=SECONDS,
            registry=self.registry,
        )
        # By method, the path of the route that answered (None for none: its template is made at `render`), status.
        self._series: dict[tuple[str, str | None, int], _Series] = {}
        self._refused = dict.fromkeys(REFUSALS, 0)
        self._mcp = 0
        self._mcp_lock = threading.Lock()
        self.served: Served | None = None
        # The MCP mount's feed subscriptions: (held now, updates queued so far), when it is mounted.
        self.feeds: Callable[[], tuple[int, int]] | None = None
        self.registry.register(_Live(self))

    # -- what the middleware records (on the event loop) ------------------------------------------

    def request(self, method: str, route: str | None, status: int, seconds: float, received: int, sent: int) -> None:
        """One request answered (a stream's once it ended); `route`: the path of the route that answered it as
        declared (`Route.path`; None when none did)."""
        series = self._series.get((method, route, status))
        if series is None:
            series = _Series()
            if len(self._series) < MAX_SERIES:
                self._series[(method, route, status)] = series
        series.count += 1
        series.seconds += seconds
        series.buckets[bisect_left(SECONDS, seconds)] += 1  # the first bound at or above it: Prometheus' `le`
        series.got += received
        series.sent += sent
        if status in self._refused:
            self._refused[status] += 1

    def refused(self, status: int) -> None:
        """A refusal answered outside any request the app saw (the HTTP edges: 408, 431, 503; `edges.py`)."""
        if status in self._refused:
            self._refused[status] += 1

    @staticmethod
    def route_of(scope: MutableMapping[str, Any]) -> str:
        """The template of the route that answered (`scope["route"]`, set by Starlette's router), else `unrouted`."""
        return template_of(getattr(scope.get("route"), "path", None))

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


def template_of(path: str | None) -> str:
    """A route's template as the metrics label it, from its path as declared (`unrouted` for no route)."""
    return _template(path) if isinstance(path, str) else UNROUTED


@lru_cache(maxsize=256)
def _template(path: str) -> str:
    # `{atom_id:segment}` as `{atom_id}`: the convertor is the server's business, not the dashboard's.
    return _CONVERTOR.sub(r"{\1}", path)


_CONVERTOR = re.compile(r"\{(\w+):\w+\}")


def _method(method: str) -> str:
    return method if method in METHODS else "OTHER"


class _Live(Collector):
    """What is read when `/metrics` is: the requests counted, the streams open by kind, the database threads' use."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        yield from self._requests()
        refusals = CounterMetricFamily(
            "mnemo_http_refusals",
            "Requests refused by a bound, by status (408, 413, 429, 431, 503).",
            labels=["reason"],
        )
        for status, count in m._refused.items():
            refusals.add_metric([str(status)], count)
        yield refusals
        served = m.served
        streams = GaugeMetricFamily("mnemo_open_streams", "Streams open now, by kind.", labels=["kind"])
        follows = served.follows.open if served is not None else 0
        walks = sum(served.walks.by_key.values()) if served is not None else 0
        for kind, value in zip(STREAM_KINDS, (follows, walks, m._mcp), strict=True):
            streams.add_metric([kind], value)
        yield streams
        if m.feeds is not None:
            held, queued = m.feeds()
            yield GaugeMetricFamily("mnemo_feed_subscriptions", "MCP feed subscriptions held now.", value=held)
            yield CounterMetricFamily(
                "mnemo_feed_updates", "Feed updates queued for a subscriber (notifications/resources/updated).", queued
            )
        if served is None:
            return
        pool = served.pool
        yield GaugeMetricFamily("mnemo_db_threads", "Database threads (one connection each).", value=pool.size)
        yield GaugeMetricFamily("mnemo_db_threads_busy", "Database threads running a job now.", value=pool.busy)
        yield GaugeMetricFamily("mnemo_db_jobs_queued", "Jobs waiting for a database thread.", value=pool.queued())

    def _requests(self) -> Iterator[Metric]:
        series = list(self.metrics._series.items())
        requests = CounterMetricFamily(
            "mnemo_http_requests", "HTTP requests answered.", labels=["method", "route", "code"]
        )
        counts: dict[tuple[str, str, str], int] = {}  # two routes may share a template: one series
        by_route: dict[tuple[str, str], _Series] = {}  # the histogram and the bytes have no status
        for (method, answered, status), one in series:
            shown, route = _method(method), template_of(answered)
            code = (shown, route, str(status))
            counts[code] = counts.get(code, 0) + one.count
            total = by_route.setdefault((shown, route), _Series())
            total.count += one.count
            total.seconds += one.seconds
            total.got += one.got
            total.sent += one.sent
            total.buckets = [a + b for a, b in zip(total.buckets, one.buckets, strict=True)]
        for code, count in counts.items():
            requests.add_metric(list(code), count)
        yield requests
        duration = HistogramMetricFamily(
            "mnemo_http_request_duration_seconds",
            "Time from a request's arrival to its answer's end (a stream's whole life).",
            labels=["method", "route"],
        )
        received = CounterMetricFamily(
            "mnemo_http_request_body_bytes", "Request body bytes received.", labels=["method", "route"]
        )
        sent = CounterMetricFamily(
            "mnemo_http_response_body_bytes", "Response body bytes sent.", labels=["method", "route"]
        )
        for labels, total in by_route.items():
            cumulative, buckets = 0, []
            for bound, count in zip(_BOUNDS, total.buckets, strict=True):
                cumulative += count
                buckets.append((bound, cumulative))
            duration.add_metric(list(labels), buckets, total.seconds)
            received.add_metric(list(labels), total.got)
            sent.add_metric(list(labels), total.sent)
        yield duration
        yield received
        yield sent
