"""Prometheus metrics of durable's runs, tasks and queues (``pip install 'durable[metrics]'``).

    from durable.ops import metrics

    metrics.instrument(engine)   # into prometheus_client's default registry

``durable worker --metrics-port 9464`` does this and serves ``/metrics``; the web app
(`durable.web.make_app`) serves them at ``/metrics`` too. docs/howto/observability.md lists
every metric.

**One set of metrics per registry.** The counters and histograms are registered once in
a registry (by default prometheus_client's ``REGISTRY``, which an application's own
``/metrics`` already serves) and every engine instrumented into it feeds them: several
engines in one process never register a time series twice. Give an engine a registry of
its own (``registry=CollectorRegistry()``) to keep its numbers apart, as tests do.

The counters count what happens in this process (runs it creates, executions and task
attempts it runs); the gauges are read when scraped: each queue's depth, running runs and
oldest queued age from the database (one cached query), and the runs each engine
executes here.
"""

from __future__ import annotations

import socket
import threading
import weakref
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from durable.errors import ConfigurationError
from durable.runtime.engine import Engine

try:
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest, make_wsgi_app
    from prometheus_client.exposition import CONTENT_TYPE_LATEST
except ImportError:  # pragma: no cover - the extra is in the test extra
    raise ConfigurationError(
        "durable's metrics need prometheus-client: pip install 'durable[metrics]'."
    ) from None

from ._counting import Counting, Families
from ._gauges import Gauges, Source

__all__ = ["CONTENT_TYPE", "Metrics", "instrument", "serve"]

#: The content type of `Metrics.exposition` (Prometheus's text format).
CONTENT_TYPE: str = CONTENT_TYPE_LATEST
#: Seconds a reading of the queues is kept: scrapes within it cost no query.
QUEUE_CACHE = 5.0

_made: weakref.WeakKeyDictionary[CollectorRegistry, Metrics] = weakref.WeakKeyDictionary()
_making = threading.Lock()


class Metrics:
    """durable's metrics in one registry (`of` gives the one for a registry)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._families = Families(registry)
        self._gauges = Gauges()
        registry.register(self._gauges)
        self._observers: dict[int, tuple[weakref.ref[Engine], Counting]] = {}
        self._lock = threading.Lock()

    @classmethod
    def of(cls, registry: CollectorRegistry | None = None) -> Metrics:
        """The metrics in *registry* (None: prometheus_client's default ``REGISTRY``),
        registered there on first use."""
        registry = REGISTRY if registry is None else registry
        with _making:
            made = _made.get(registry)
            if made is None:
                made = _made[registry] = cls(registry)
            return made

    def add(self, engine: Engine, *, queues: bool = True, cache: float = QUEUE_CACHE) -> None:
        """Count *engine*'s runs and attempts from now on, and report its executing runs
        and (if *queues*) its database's queues, read at most every *cache* seconds.
        Adding an engine again changes nothing."""
        if cache < 0:
            raise ValueError(f"cache must be 0 or more seconds, not {cache!r}.")
        with self._lock:
            if id(engine) in self._observers and self._observers[id(engine)][0]() is engine:
                return
            observer = Counting(self._families, engine.clock)
            self._observers[id(engine)] = (weakref.ref(engine), observer)
        engine.observers.add(observer)
        self._gauges.add(Source(engine, queues=queues, cache=cache))

    def remove(self, engine: Engine) -> None:
        """Stop counting *engine*'s runs and reporting its gauges."""
        with self._lock:
            _, observer = self._observers.pop(id(engine), (None, None))
        if observer is not None:
            engine.observers.remove(observer)
        self._gauges.remove(engine)

    def exposition(self) -> bytes:
        """The registry's metrics in Prometheus's text format (`CONTENT_TYPE`)."""
        return generate_latest(self.registry)


def instrument(
    engine: Engine,
    *,
    registry: CollectorRegistry | None = None,
    queues: bool = True,
    cache: float = QUEUE_CACHE,
) -> Metrics:
    """Feed durable's metrics in *registry* (None: prometheus_client's default) from
    *engine* (see `Metrics.add`).

    Returns:
        The metrics of that registry.
    """
    metrics = Metrics.of(registry)
    metrics.add(engine, queues=queues, cache=cache)
    return metrics


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not news


def serve(port: int, host: str = "127.0.0.1", registry: CollectorRegistry | None = None) -> Any:
    """Serve *registry*'s metrics (None: the default registry) at
    ``http://host:port/metrics`` from a daemon thread.

    Returns:
        The server, bound and serving (``server.server_port`` is the port bound, for
        port 0; ``server.shutdown()`` stops it).

    Raises:
        ConfigurationError: the port is in use, or the address cannot be bound.
    """
    if not 0 <= port <= 65535:
        raise ValueError(f"The metrics port must be 0 to 65535, not {port}.")
    app = make_wsgi_app(REGISTRY if registry is None else registry)
    try:
        server = make_server(
            host, port, app, _Server6 if ":" in host else _Server, handler_class=_Quiet
        )
    except OSError as error:
        raise ConfigurationError(
            f"Cannot serve metrics on {host}:{port}: {error.strerror or error}. Choose "
            "another --metrics-port (or stop what listens there)."
        ) from None
    threading.Thread(target=server.serve_forever, name="durable-metrics", daemon=True).start()
    return server
