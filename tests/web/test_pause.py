"""Pausing and resuming runs through the REST API (POST /runs/{id}/pause, /resume), on
SQLite and PostgreSQL, with a worker serving the runs; every answer is checked against
the OpenAPI document."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, dispatch, task, wait, workflow
from durable.web import WebApp, make_app
from tests.web.installed import installed
from tests.web.openapi_check import CheckedClient

TOKEN = "pause-test-token"
LIVE = "pause-live"  # the queue the module's worker serves
_ids = itertools.count()
#: `hold` blocks until GATES[its argument] is set; ENTERED[...] says it got there.
GATES: dict[str, threading.Event] = {}
ENTERED: dict[str, threading.Event] = {}


@task
def prepare(order: str) -> str:
    return f"prepared {order}"


@task
def hold(key: str) -> str:
    ENTERED[key].set()
    GATES[key].wait(30)
    return key


@workflow
def approval(order: str) -> dict[str, Any]:
    prepare(order)
    answer = wait("approved", timeout=600)
    return {"order": order, "answer": answer}


@workflow
def gated(key: str) -> list[str]:
    return [hold(key), prepare(key)]


def _until(condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@dataclass
class World:
    engine: durable.Engine
    app: WebApp
    api: CheckedClient

    def status(self, run_id: str) -> RunStatus | None:
        run = self.engine.backend.get_run(run_id)
        return None if run is None else run.status

    def wait_status(self, run_id: str, status: RunStatus) -> None:
        _until(lambda: self.status(run_id) is status, f"run {run_id} to be {status}")

    def waiting_run(self, prefix: str) -> str:
        run_id = f"{prefix}-{next(_ids)}"
        dispatch(approval, run_id, id=run_id, queue=LIVE)
        self.wait_status(run_id, RunStatus.WAITING)
        return run_id

    def actions(self, run_id: str) -> list[tuple[str, str | None, Any]]:
        detail = self.api.get(f"/api/v1/runs/{run_id}").json()
        return [(a["action"], a["actor"], a["detail"]) for a in detail["actions"]]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """A database with a completed run ("done"), and a worker serving the LIVE queue."""
    with installed(request.param, tmp_path_factory.mktemp("pause")) as engine:
        worker = Worker(engine, queues=[LIVE], poll=0.02, concurrency=4).start()
        try:
            durable.execute(prepare, "o-0", id="done")
            app = make_app(engine, token=TOKEN)
            yield World(engine, app, CheckedClient(app, token=TOKEN))
        finally:
            for gate in GATES.values():
                gate.set()
            worker.stop(grace=2)


def test_pause_then_resume_a_waiting_run(world: World) -> None:
    """Paused at once, listed as paused; an event sent meanwhile is taken only after the
    resume; both acts are recorded with who did them."""
    run_id = world.waiting_run("waiting")
    reply = world.api.post(f"/api/v1/runs/{run_id}/pause", {"actor": "bob"})
    assert reply.status == 200
    assert (reply.json()["status"], reply.json()["pause_requested"]) == ("paused", False)
    assert world.status(run_id) is RunStatus.PAUSED
    listed = world.api.get("/api/v1/runs", "status=paused").json()["items"]
    assert run_id in [run["id"] for run in listed]
    sent = world.api.post(f"/api/v1/runs/{run_id}/events", {"name": "approved", "data": 7})
    assert sent.status == 201
    time.sleep(0.3)  # the worker polls: a paused run is never claimed, the event waits
    assert world.status(run_id) is RunStatus.PAUSED
    shown = world.api.get(f"/api/v1/runs/{run_id}").json()
    assert shown["status"] == "paused" and shown["events"][0]["consumed_position"] is None

    resumed = world.api.post(f"/api/v1/runs/{run_id}/resume", {"actor": "carol"})
    # Queued by the resume; the worker (polling every 20 ms) may have claimed it already
    # by the time the reply reads it back.
    assert resumed.status == 200 and resumed.json()["status"] in ("queued", "running")
    world.wait_status(run_id, RunStatus.COMPLETED)
    assert world.api.get(f"/api/v1/runs/{run_id}").json()["output"] == {
        "order": run_id,
        "answer": 7,
    }
    assert world.actions(run_id) == [
        ("pause", "bob", {"status_before": "waiting"}),
        ("send", "api", {"event": "approved", "key": None, "event_id": shown["events"][0]["id"]}),
        ("resume", "carol", {"status_before": "paused"}),
    ]


def test_a_running_run_is_asked_to_pause(world: World) -> None:
    """A run busy in a task gets pause_requested (the dashboard shows it); it parks as
    the task returns, and goes on once resumed."""
    run_id = f"busy-{next(_ids)}"
    GATES[run_id], ENTERED[run_id] = threading.Event(), threading.Event()
    dispatch(gated, run_id, id=run_id, queue=LIVE)
    _until(ENTERED[run_id].is_set, "the task to start")
    reply = world.api.post(f"/api/v1/runs/{run_id}/pause")
    assert reply.status == 200
    assert (reply.json()["status"], reply.json()["pause_requested"]) == ("running", True)
    assert world.api.get(f"/api/v1/runs/{run_id}").json()["pause_requested"] is True
    GATES[run_id].set()
    world.wait_status(run_id, RunStatus.PAUSED)
    run = world.api.get(f"/api/v1/runs/{run_id}").json()
    assert (run["status"], run["pause_requested"]) == ("paused", False)
    # it parked at its next durable call: prepare's start is recorded, its body did not run
    steps = [(s["name"].rsplit(".", 1)[-1], s["status"]) for s in run["history"]]
    assert steps == [("hold", "completed"), ("prepare", "running")]
    assert world.api.post(f"/api/v1/runs/{run_id}/resume").status == 200
    world.wait_status(run_id, RunStatus.COMPLETED)
    run = world.api.get(f"/api/v1/runs/{run_id}").json()
    assert run["output"] == [run_id, f"prepared {run_id}"]
    assert [step["attempts"] for step in run["history"]] == [1, 1]  # the pause cost no attempt
    assert [(a, who) for a, who, _ in world.actions(run_id)] == [
        ("pause", "api"),
        ("resume", "api"),
    ]


def test_a_paused_queued_run_draws_a_paused_box(world: World) -> None:
    """Paused before it started: its graph's next box says so."""
    run_id = f"parked-{next(_ids)}"
    dispatch(approval, run_id, id=run_id, queue="nobody")
    assert world.api.post(f"/api/v1/runs/{run_id}/pause").json()["status"] == "paused"
    nodes = {
        node["id"]: node for node in world.api.get(f"/api/v1/runs/{run_id}/graph").json()["nodes"]
    }
    assert (nodes["p0"]["state"], nodes["p0"]["label"]) == ("ready", "paused")
    assert nodes["end"]["state"] == "not-reached"


def test_a_cancelled_run_is_resumed(world: World) -> None:
    run_id = world.waiting_run("cancelled")
    assert world.api.post(f"/api/v1/runs/{run_id}/cancel").status == 200
    world.wait_status(run_id, RunStatus.CANCELLED)
    assert world.api.post(f"/api/v1/runs/{run_id}/pause").status == 409
    reply = world.api.post(f"/api/v1/runs/{run_id}/resume", {"actor": "dave"})
    assert reply.status == 200 and reply.json()["cancel_requested"] is False
    world.wait_status(run_id, RunStatus.WAITING)
    assert world.api.post(f"/api/v1/runs/{run_id}/events", {"name": "approved"}).status == 201
    world.wait_status(run_id, RunStatus.COMPLETED)
    assert [(a, who) for a, who, _ in world.actions(run_id)] == [
        ("cancel", "api"),
        ("resume", "dave"),
        ("send", "api"),
    ]


def test_finished_runs_are_409(world: World) -> None:
    """A completed run can be neither paused nor resumed: 409 problem+json saying why."""
    paused = world.api.post("/api/v1/runs/done/pause", {"actor": "eve"})
    assert paused.status == 409 and paused.content_type == "application/problem+json"
    assert paused.json()["detail"] == (
        "Run 'done' has already finished (completed); there is nothing to pause."
    )
    resumed = world.api.post("/api/v1/runs/done/resume")
    assert resumed.status == 409
    assert "only paused runs (and cancelled ones) can be resumed" in resumed.json()["detail"]
    assert world.actions("done") == []


def test_a_run_that_is_not_paused_is_not_resumed(world: World) -> None:
    run_id = world.waiting_run("unpaused")
    reply = world.api.post(f"/api/v1/runs/{run_id}/resume")
    assert reply.status == 409 and "It is not paused" in reply.json()["detail"]
    assert world.status(run_id) is RunStatus.WAITING


@pytest.mark.parametrize("action", ["pause", "resume"])
def test_unknown_runs_are_404(world: World, action: str) -> None:
    reply = world.api.post(f"/api/v1/runs/nope/{action}")
    assert reply.status == 404 and "nope" in reply.json()["detail"]


def test_a_browser_session_pauses_as_the_dashboard(world: World) -> None:
    """With the cookie (and CSRF token) the actor is "dashboard" unless named."""
    browser = CheckedClient(world.app)
    browser.login(TOKEN)
    run_id = world.waiting_run("session")
    assert browser.post(f"/api/v1/runs/{run_id}/pause").status == 200
    assert browser.post(f"/api/v1/runs/{run_id}/resume", {"actor": "frank"}).status == 200
    missing = browser.post(f"/api/v1/runs/{run_id}/pause", headers={"X-CSRF-Token": ""})
    assert missing.status == 403
    assert [(a, who) for a, who, _ in world.actions(run_id)] == [
        ("pause", "dashboard"),
        ("resume", "frank"),
    ]


def test_a_read_only_dashboard_refuses_both(world: World) -> None:
    app = make_app(world.engine, token=TOKEN, read_only=True)
    api = CheckedClient(app, token=TOKEN)
    for action in ("pause", "resume"):
        reply = api.post(f"/api/v1/runs/done/{action}")
        assert reply.status == 403 and "paused, resumed" in reply.json()["detail"]
