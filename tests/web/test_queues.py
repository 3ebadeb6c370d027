"""GET /api/v1/queues: the `Operations.queues` views, documented in the OpenAPI
document (every answer is checked against it), behind the same login as every read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from durable.ops import Operations
from durable.testing import DurableEnv
from durable.web import WebApp, make_app
from tests.unit.test_ops_queues import fill
from tests.web.client import Client
from tests.web.openapi_check import CheckedClient

TOKEN = "queues-test-token"


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv(start=dt.datetime(2026, 5, 4, 12, tzinfo=dt.UTC)) as world:
        yield world


@pytest.fixture
def app(env: DurableEnv) -> Iterator[WebApp]:
    app = make_app(env.engine, token=TOKEN)
    try:
        yield app
    finally:
        app.close()


def test_the_list_is_the_operations_view(env: DurableEnv, app: WebApp) -> None:
    api = CheckedClient(app, token=TOKEN)
    assert api.get("/api/v1/queues").json() == {"items": []}

    fill(env.engine, env.clock.advance)
    reply = api.get("/api/v1/queues")
    assert reply.status == 200 and reply.content_type == "application/json"
    items = reply.json()["items"]
    assert items == Operations(env.engine).queues()
    emails = items[0]
    assert (emails["name"], emails["queued"], emails["running"]) == ("emails", 2, 2)
    assert (emails["concurrency"], emails["key_concurrency"]) == (2, 1)
    assert (emails["rate"], emails["oldest_queued_age"]) == ("100 per 0:00:01", 20.0)
    assert emails["keys"] == {"tenant-a": 1, "tenant-b": 1}
    assert [item["name"] for item in items] == ["emails", "idle", "imports", "reports"]

    env.clock.advance(7)  # the age is read at each request
    assert api.get("/api/v1/queues").json()["items"][0]["oldest_queued_age"] == 27.0


def test_it_is_guarded_like_every_read(env: DurableEnv, app: WebApp) -> None:
    fill(env.engine, env.clock.advance)
    anonymous = CheckedClient(app).get("/api/v1/queues")
    assert anonymous.status == 401 and "Bearer" in (anonymous.header("WWW-Authenticate") or "")
    assert Client(app, token="wrong").get("/api/v1/queues").status == 401

    browser = Client(app)
    browser.login(TOKEN)
    assert len(browser.get("/api/v1/queues").json()["items"]) == 4
    refused = Client(app, token=TOKEN).post("/api/v1/queues", {})
    assert refused.status == 405 and refused.header("Allow") == "GET"

    read_only = make_app(env.engine, token=TOKEN, read_only=True)
    try:
        shown = CheckedClient(read_only, token=TOKEN).get("/api/v1/queues")
        assert shown.status == 200 and shown.json()["items"][0]["running"] == 2
    finally:
        read_only.close()
