"""A run that reached its deadline (status timed_out) through the REST API, on SQLite
and PostgreSQL, every answer checked against the OpenAPI document; and its graph."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, task, wait, workflow
from durable.web import WebApp, make_app
from durable.web._layout import layout
from tests.web.installed import installed
from tests.web.openapi_check import CheckedClient

TOKEN = "timed-out-test-token"
#: How long `overdue` may run: short, so that a worker sees it pass, yet long enough
#: for a loaded machine to claim the run and end its task first, so that the deadline
#: is met at the wait (0.3 s was not: the deadline was once delivered at the task's
#: return instead, `durable.timeout.on-return`).
TIMEOUT = 2.0


@task
def prepare(order: str) -> str:
    return f"prepared {order}"


@workflow(timeout=TIMEOUT)
def overdue(order: str) -> Any:
    """One task, then a wait for an event that never comes, past its deadline."""
    prepare(order)
    return wait("approved")


@workflow
def punctual(order: str) -> str:
    return prepare(order)


@dataclass
class World:
    engine: durable.Engine
    app: WebApp
    api: CheckedClient


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """Two runs: on-time completed (it has no deadline), late timed out."""
    with installed(request.param, tmp_path_factory.mktemp("timed-out")) as engine:
        durable.execute(punctual, "o-1", id="on-time")
        durable.dispatch(overdue, "o-2", id="late")
        with Worker(engine, poll=0.02):
            limit = time.monotonic() + 30
            while (run := engine.backend.get_run("late")) is None or not run.status.finished:
                assert time.monotonic() < limit, "the run did not reach its deadline"
                time.sleep(0.02)
        assert run.status is RunStatus.TIMED_OUT
        app = make_app(engine, token=TOKEN)
        yield World(engine, app, CheckedClient(app, token=TOKEN))


def moment(iso: str) -> dt.datetime:
    return dt.datetime.fromisoformat(iso)


def test_a_timed_out_run_is_listed_by_its_status(world: World) -> None:
    """status=timed_out finds it; it is not among the failed; each run has deadline_at."""
    page = world.api.get("/api/v1/runs", "status=timed_out").json()
    assert [(run["id"], run["status"]) for run in page["items"]] == [("late", "timed_out")]
    assert world.api.get("/api/v1/runs", "status=failed").json()["items"] == []
    everything = {run["id"]: run for run in world.api.get("/api/v1/runs").json()["items"]}
    assert everything["on-time"]["deadline_at"] is None
    assert everything["late"]["deadline_at"] is not None


def test_a_timed_out_run_in_full(world: World) -> None:
    """Its view carries the deadline (creation + timeout, ISO like the other times) and
    the WorkflowTimeout it ended with; its history, the marker where it was stopped."""
    run = world.api.get("/api/v1/runs/late").json()
    assert run["status"] == "timed_out"
    assert run["deadline_at"].endswith("Z")
    given = moment(run["deadline_at"]) - moment(run["created_at"])
    assert abs(given.total_seconds() - TIMEOUT) < 0.01
    assert run["error"]["type"] == "durable.errors.WorkflowTimeout"
    assert [(step["kind"], step["name"]) for step in run["history"]] == [
        ("task", prepare.name),
        ("cancel", "durable.timeout"),
    ]
    assert world.api.get("/api/v1/runs/on-time").json()["deadline_at"] is None


def test_the_graph_of_a_timed_out_run(world: World) -> None:
    """The marker box says "timed out"; the run ended in an error: a failed end."""
    graph = world.api.get("/api/v1/runs/late/graph").json()
    by_id = {node["id"]: node for node in graph["nodes"]}
    assert (by_id["p1"]["label"], by_id["p1"]["state"]) == ("timed out", "cancelled")
    assert by_id["end"]["state"] == "failed"


def test_a_timed_out_run_counts_as_a_failure(world: World) -> None:
    stats = world.api.get("/api/v1/stats", f"workflow={overdue.name}").json()
    [stat] = stats["workflows"]
    assert (stat["completed"], stat["failed"], stat["success"]) == (0, 1, 0)


def test_a_timed_out_run_is_neither_retried_nor_cancelled(world: World) -> None:
    """Its deadline has passed: a retry would time out at once (409, saying so)."""
    retried = world.api.post("/api/v1/runs/late/retry")
    assert retried.status == 409 and "deadline has passed" in retried.json()["detail"]
    assert world.api.post("/api/v1/runs/late/cancel").status == 409
    run = world.engine.backend.get_run("late")
    assert run is not None and run.status is RunStatus.TIMED_OUT


# -- the layout alone -------------------------------------------------------------------


def _step(position: int, **fields: Any) -> dict[str, Any]:
    return {"position": position, "kind": "task", "name": f"app.t{position}",
            "status": "completed", "attempts": 1, "duration": 0.1, "group": position,
            **fields}  # fmt: skip


def test_a_timed_out_run_without_a_marker_gets_a_timed_out_box() -> None:
    """Stopped where no marker was recorded (a task it waited on was stopped): the next
    box says "timed out", a wait left open is stopped, not ready, and the end failed."""
    run = {"id": "r", "status": "timed_out"}
    graph = layout(run, [_step(0)], [])
    states = {node["id"]: (node["state"], node["label"]) for node in graph["nodes"]}
    assert states["p1"] == ("cancelled", "timed out")
    assert states["end"] == ("failed", "end")
    waiting = _step(1, kind="sleep", name="durable.sleep", status="waiting")
    states = {n["id"]: n["state"] for n in layout(run, [_step(0), waiting], [])["nodes"]}
    assert states["p1"] == "cancelled"
