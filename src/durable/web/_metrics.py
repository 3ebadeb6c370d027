"""``/metrics``: durable's Prometheus metrics (`durable.ops.metrics`) for the app's engine,
behind the token unless the app makes them public."""

from __future__ import annotations

from typing import Any

from durable.errors import ConfigurationError
from durable.runtime.engine import Engine

from ._http import HTTPError, Request, Response


def metrics_response(request: Request, engine: Engine, registry: Any) -> Response:
    """The metrics of *registry* (None: prometheus_client's default), *engine* counted
    into them from its first scrape (and its queues read, cached a few seconds)."""
    if request.method not in ("GET", "HEAD"):
        raise HTTPError(405, f"{request.method} is not allowed here.", headers=[("Allow", "GET")])
    try:
        from durable.ops import metrics
    except ConfigurationError as error:  # the extra is not installed
        return Response.problem(501, str(error))
    found = metrics.instrument(engine, registry=registry)
    headers = [("Content-Type", metrics.CONTENT_TYPE), ("Cache-Control", "no-store")]
    return Response(200, headers, found.exposition())
