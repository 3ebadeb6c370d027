"""Workflow properties on SQLite and PostgreSQL (the virtual-clock versions are in
tests/unit/test_properties.py): snapshots ride on the step writes (the task pair, an
event wait's consumption, the run's end), a worker runs a class workflow, a resumed
execution after a crash writes no snapshot again, and readers see the latest."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest

import durable
from durable import RunStatus, task, wait, workflow
from durable.runtime.worker import Worker

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.parametrize("url", SQL, indirect=True)


@task
def pack(item: str) -> str:
    return f"packed {item}"


@workflow
class Shipment:
    def __init__(self, items: list[str]) -> None:
        self.items = items
        self.packed: list[str] = []
        self.status = "new"

    def handle(self) -> list[str]:
        for item in self.items:
            self.packed.append(pack(item))
            self.status = f"packed {len(self.packed)}"
        self.status = "waiting for pickup"
        carrier = wait("picked_up", timeout=timedelta(minutes=5))
        self.status = f"picked up by {carrier}"
        return self.packed


def _snapshots(engine: durable.Engine, run_id: str) -> list[tuple[int, str]]:
    return [
        (step.position, json.loads(step.state[1:])["status"])
        for step in engine.backend.load_history(run_id)
        if step.state is not None
    ]


def test_a_class_workflow_publishes_its_properties_through_a_worker(
    engine: durable.Engine,
) -> None:
    handle = durable.dispatch(Shipment, ["a", "b"])
    with Worker(engine, poll=0.05):
        deadline = time.monotonic() + 20
        while handle.status() is not RunStatus.WAITING and time.monotonic() < deadline:
            time.sleep(0.02)
        assert handle.state()["status"] == "waiting for pickup"
        durable.send(handle.id, "picked_up", "ACME")
        assert handle.result(timeout=20) == ["packed a", "packed b"]
    assert handle.state() == {
        "items": ["a", "b"],
        "packed": ["packed a", "packed b"],
        "status": "picked up by ACME",
    }
    # Each task's start carries what the code before it changed; the wait the rest.
    assert _snapshots(engine, handle.id) == [(0, "new"), (1, "packed 1"), (2, "waiting for pickup")]
    run = engine.reread(handle.id)
    assert run.state is not None and json.loads(run.state[1:])["status"] == "picked up by ACME"


def test_set_state_is_stored_with_the_next_step_on_sql(engine: durable.Engine) -> None:
    @workflow
    def counting(n: int) -> int:
        for i in range(n):
            durable.set_state(done=i)
            pack(str(i))
        return n

    assert durable.execute(counting, 3, id="counting") == 3
    history = engine.backend.load_history("counting")
    assert [json.loads(s.state[1:]) for s in history if s.state] == [
        {"done": 0},
        {"done": 1},
        {"done": 2},
    ]
    assert durable.get("counting").state() == {"done": 2}
