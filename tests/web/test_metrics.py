"""GET /metrics on the web app: behind the token like every path unless the app makes it
public, Prometheus's text format, the app's engine counted into the registry it serves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from durable.testing import DurableEnv
from durable.web import make_app
from tests.unit.test_metrics import double, without_prometheus
from tests.web.client import Client

TOKEN = "metrics-web-token"


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as world:
        yield world


def names(body: bytes) -> set[str]:
    return {family.name for family in text_string_to_metric_families(body.decode())}


def test_metrics_need_the_token_by_default(env: DurableEnv) -> None:
    """Without the token /metrics is 401 like the API; with it (bearer or the session
    cookie) the registry's metrics, the app's engine counted from the first scrape."""
    registry = CollectorRegistry()
    app = make_app(env.engine, token=TOKEN, metrics_registry=registry)
    assert Client(app).get("/metrics").status == 401
    reply = Client(app, token=TOKEN).get("/metrics")
    assert reply.status == 200 and reply.content_type == "text/plain"
    assert reply.header("Cache-Control") == "no-store"
    assert {"durable_queue_depth", "durable_worker_running_runs"} <= names(reply.body)
    env.execute(double, 4)  # counted: the scrape instrumented the engine
    browser = Client(app)
    browser.login(TOKEN)
    body = browser.get("/metrics").body.decode()
    assert f'durable_runs_created_total{{workflow="{double.name}"}} 1.0' in body
    assert Client(app, token=TOKEN).request("POST", "/metrics").status in (403, 405)


def test_public_metrics_need_no_token_and_nothing_else_opens(env: DurableEnv) -> None:
    """``public_metrics=True`` serves /metrics to anyone who reaches it; the API and the
    dashboard still need the token, and the Host check still applies."""
    app = make_app(env.engine, token=TOKEN, public_metrics=True, metrics_registry=None)
    reply = Client(app).get("/metrics")
    assert reply.status == 200 and "durable_queue_depth" in names(reply.body)
    assert Client(app).get("/api/v1/runs").status == 401
    assert Client(app, host="evil.example").get("/metrics").status == 400
    assert Client(app).request("PUT", "/metrics").status == 405


def test_without_prometheus_client_metrics_answer_501(
    env: DurableEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dashboard works without the extra; /metrics says what to install."""
    without_prometheus(monkeypatch)
    app = make_app(env.engine, token=TOKEN)
    reply = Client(app, token=TOKEN).get("/metrics")
    assert reply.status == 501
    assert "pip install 'durable[metrics]'" in reply.json()["detail"]
    assert Client(app, token=TOKEN).get("/api/v1/runs").status == 200
