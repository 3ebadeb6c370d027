"""GET /api/v1/overview and /api/v1/workflows: figures that equal what the runs say,
chart buckets that are exactly a runs-list filter, checked against the OpenAPI
document, behind the same login as every read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from durable import RunStatus, task, workflow
from durable.core.records import RunQuery
from durable.testing import DurableEnv
from durable.web import WebApp, make_app
from tests.web.client import Client
from tests.web.openapi_check import CheckedClient

TOKEN = "overview-test-token"
START = dt.datetime(2026, 5, 4, 12, tzinfo=dt.UTC)
COMPLETED, FAILED = RunStatus.COMPLETED, RunStatus.FAILED
DEAD, TIMED_OUT = RunStatus.DEAD, RunStatus.TIMED_OUT


@task
def step(n: int) -> int:
    if n % 5 == 0:
        raise ValueError(f"{n} is a multiple of five")
    return n


@workflow
def counted(n: int) -> int:
    return step(n)


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv(start=START) as world:
        yield world


@pytest.fixture
def app(env: DurableEnv) -> Iterator[WebApp]:
    app = make_app(env.engine, token=TOKEN)
    try:
        yield app
    finally:
        app.close()


def seed(env: DurableEnv) -> None:
    """12 runs of `counted` over the last 40 minutes (2 fail), 3 queued."""
    for n in range(1, 13):
        env.dispatch(counted, n, id=f"c-{n:02d}")
        env.run_until_idle()
        env.advance(dt.timedelta(minutes=3, seconds=20))
    for n in range(3):
        env.engine.dispatch_call(counted.bind(100 + n), run_id=f"q-{n}")


def runs(env: DurableEnv, **query: object) -> list[str]:
    found = env.engine.backend.list_runs(RunQuery(**query), limit=1000)  # type: ignore[arg-type]
    return sorted(run.id for run in found)


def test_the_overview_equals_what_the_runs_say(env: DurableEnv, app: WebApp) -> None:
    seed(env)
    api = CheckedClient(app, token=TOKEN)
    reply = api.get("/api/v1/overview")
    assert reply.status == 200
    shown = reply.json()
    backend = env.engine.backend
    every = backend.list_runs(RunQuery(), limit=1000)
    by_status: dict[str, int] = {}
    for run in every:
        by_status[run.status] = by_status.get(run.status, 0) + 1
    assert shown["counts"]["queued"] == by_status.get("queued", 0) == 3
    assert shown["counts"]["running"] == shown["counts"]["waiting"] == 0
    assert shown["counts"]["failed"] == by_status.get("failed", 0) == 2  # 5 and 10
    assert shown["counts"]["completed"] == by_status.get("completed", 0) == 10
    assert len(shown["minutes"]) == 60 and len(shown["hours"]) == 168
    assert sum(point["started"] for point in shown["minutes"]) == len(every)
    assert sum(point["failed"] for point in shown["hours"]) == 2
    # Each bar is exactly a runs-list filter on creation time and status.
    for point in shown["minutes"]:
        start = dt.datetime.fromisoformat(point["at"].replace("Z", "+00:00")).timestamp()
        window = {"since": start, "until": start + 60}
        assert point["started"] == len(runs(env, **window))
        failed = runs(env, statuses=(FAILED, DEAD, TIMED_OUT), **window)
        assert point["failed"] == len(failed)
        assert point["completed"] == len(runs(env, statuses=(COMPLETED,), **window))
    [figures] = [w for w in shown["workflows"] if w["name"] == counted.name]
    assert (figures["runs"], figures["completed"], figures["failed"]) == (15, 10, 2)
    assert figures["success"] == round(100 * 10 / 12, 2)
    [failing] = shown["failing_tasks"]
    assert (failing["name"], failing["failed"], failing["runs"]) == (step.name, 2, 12)
    assert shown["blocked"]["count"] == 0 and "durable check" in shown["blocked"]["advice"]
    assert shown["dead"] == {"count": 0}


def test_the_workflows_page_has_figures_and_sparklines(env: DurableEnv, app: WebApp) -> None:
    seed(env)
    api = CheckedClient(app, token=TOKEN)
    page = api.get("/api/v1/workflows").json()
    items = {(item["kind"], item["name"]): item for item in page["items"]}
    flow = items["workflow", counted.name]
    assert len(flow["spark"]) == 24 and sum(flow["spark"]) == 15
    assert flow["spark"][-1] == 15, "every run was created in this hour"
    calls = items["task", step.name]
    assert (calls["runs"], calls["failed"], calls["completed"]) == (12, 2, 10)
    assert calls["p50_duration"] is not None and calls["last_failure_at"] is not None
    later = api.get("/api/v1/workflows", query="since=2026-05-05T00:00:00Z").json()
    assert later["items"] == [] and later["since"] == "2026-05-05T00:00:00.000000Z"


def test_they_are_guarded_like_every_read(env: DurableEnv, app: WebApp) -> None:
    for path in ("/api/v1/overview", "/api/v1/workflows"):
        assert CheckedClient(app).get(path).status == 401
        assert Client(app, token="wrong").get(path).status == 401
    bad = CheckedClient(app, token=TOKEN).get("/api/v1/workflows", query="since=yesterday")
    assert bad.status == 400 and "since" in bad.json()["detail"]
