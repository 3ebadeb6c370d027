"""Forking a run through the REST API (POST /runs/{id}/fork), on SQLite and PostgreSQL,
with a worker serving the runs: fail, fix, fork; the ledger the task bodies write shows
what ran; every answer is checked against the OpenAPI document."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, dispatch, task, workflow
from durable.web import make_app
from tests.web.installed import installed
from tests.web.openapi_check import CheckedClient

TOKEN = "fork-test-token"
LIVE = "fork-live"
_ids = itertools.count()


@task
def note(log: str, line: str) -> str:
    with Path(log).open("a") as file:
        file.write(line + "\n")
    return line


@task
def flaky(log: str, flag: str) -> str:
    note.fn(log, "flaky")
    if not Path(flag).exists():
        raise RuntimeError("not fixed yet")
    return "fixed"


@workflow
def pipeline(log: str, flag: str) -> list[str]:
    first = note(log, "a")
    both = durable.execute(note.bind(log, "b"), note.bind(log, "c"))
    return [first, *both, flaky(log, flag)]


def _until(condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@dataclass
class World:
    engine: durable.Engine
    api: CheckedClient
    tmp: Path

    def status(self, run_id: str) -> RunStatus | None:
        run = self.engine.backend.get_run(run_id)
        return None if run is None else run.status

    def wait_status(self, run_id: str, status: RunStatus) -> None:
        _until(lambda: self.status(run_id) is status, f"run {run_id} to be {status}")

    def failed_run(self) -> tuple[str, Path, Path]:
        """A run of `pipeline` failed in `flaky`; its ledger file and fix flag."""
        run_id = f"p-{next(_ids)}"
        log, flag = self.tmp / f"{run_id}.log", self.tmp / f"{run_id}.flag"
        dispatch(pipeline, str(log), str(flag), id=run_id, queue=LIVE)
        self.wait_status(run_id, RunStatus.FAILED)
        return run_id, log, flag

    def actions(self, run_id: str) -> list[tuple[str, str | None, Any]]:
        detail = self.api.get(f"/api/v1/runs/{run_id}").json()
        return [(a["action"], a["actor"], a["detail"]) for a in detail["actions"]]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("fork")
    with installed(request.param, tmp) as engine:
        worker = Worker(engine, queues=[LIVE], poll=0.02, concurrency=4).start()
        try:
            yield World(engine, CheckedClient(make_app(engine, token=TOKEN), token=TOKEN), tmp)
        finally:
            worker.stop(grace=2)


def test_fail_fix_fork_through_the_api(world: World) -> None:
    """201 with the new run (Location, origin); copied rows are identical and their
    bodies never run again; the original is byte-identical afterwards; both runs
    record the fork with its actor; the fork of the fork works too."""
    run_id, log, flag = world.failed_run()
    backend = world.engine.backend
    before = (backend.get_run(run_id), list(backend.load_history(run_id)))
    flag.touch()
    reply = world.api.post(f"/api/v1/runs/{run_id}/fork", {"from": 3, "actor": "ann"})
    assert reply.status == 201
    answer = reply.json()
    new_id = answer["run"]["id"]
    assert (answer["origin"], answer["from"], answer["run"]["origin"]) == (run_id, 3, run_id)
    assert (reply.header("Location") or "").endswith(f"/api/v1/runs/{new_id}")
    world.wait_status(new_id, RunStatus.COMPLETED)
    assert world.api.get(f"/api/v1/runs/{new_id}").json()["output"] == ["a", "b", "c", "fixed"]
    assert sorted(log.read_text().split()) == ["a", "b", "c", "flaky", "flaky"]
    copied = list(backend.load_history(new_id))[:3]
    assert copied == [dataclasses.replace(step, run_id=new_id) for step in before[1][:3]]
    assert (backend.get_run(run_id), list(backend.load_history(run_id))) == before
    assert world.actions(run_id) == [("fork", "ann", {"from": 3, "fork": new_id})]
    assert world.actions(new_id) == [("fork", "ann", {"from": 3, "origin": run_id})]

    again = world.api.post(f"/api/v1/runs/{new_id}/fork", {"from": 1, "id": f"{run_id}-again"})
    assert again.status == 201 and again.json()["run"]["origin"] == new_id
    world.wait_status(f"{run_id}-again", RunStatus.COMPLETED)
    lines = log.read_text().split()
    assert sorted(lines) == ["a", "b", "b", "c", "c", "flaky", "flaky", "flaky"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"from": 2}, 400, "positions 1 to 2 are one parallel group"),
        ({"from": 5}, 400, "positions 0 to 3, so a fork starts from 0 to 4"),
        ({"from": -1}, 400, "'from' field must be a position"),
        ({}, 400, "needs a 'from' field"),
        ({"from": True}, 400, "'from' field must be an integer"),
        ({"from": "1"}, 400, "'from' field must be an integer"),
        ({"from": 0, "id": "{taken}"}, 409, "already exists"),
        ({"from": 0, "id": 7}, 400, "'id' field must be a string"),
    ],
)
def test_bad_input_is_refused(
    world: World, body: dict[str, Any], status: int, message: str
) -> None:
    """Each bad input gets its status and a message naming what is valid; nothing is
    created."""
    run_id, _, _ = world.failed_run()
    if body.get("id") == "{taken}":
        body = {**body, "id": run_id}
    before = world.api.get("/api/v1/runs", "limit=500").json()["items"]
    reply = world.api.post(f"/api/v1/runs/{run_id}/fork", body)
    assert reply.status == status, reply.body
    assert message in reply.json()["detail"]
    assert world.api.get("/api/v1/runs", "limit=500").json()["items"] == before


def test_an_unknown_run_is_404(world: World) -> None:
    """Forking a run that does not exist: 404 naming it."""
    reply = world.api.post("/api/v1/runs/nobody/fork", {"from": 0})
    assert reply.status == 404 and "'nobody'" in reply.json()["detail"]
