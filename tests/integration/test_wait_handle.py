"""`wait(handle)` for a run another process executes, and background tasks on a worker.

A waiter must not busy-loop the database: on PostgreSQL it sleeps until LISTEN/NOTIFY
says the run changed (re-reading at most once a second anyway), on SQLite it polls
every 50 ms (`durable.backends.sql._waits.SQLITE_POLL`). Here the run is executed by a
`durable worker` process, so no in-process notification can help the waiter.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

import durable
from durable import RunStatus, StepKind, wait
from tests.e2e.checker import read_ledger
from tests.e2e.harness import Children
from tests.e2e.test_workers import ready, stop_all, until
from tests.e2e.worker_command_app import lasting, order, send_receipt

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.e2e


def start_worker(children: Children) -> subprocess.Popen[str]:
    """A ready ``durable worker tests.e2e.worker_command_app`` on the test's database."""
    command = ["-m", "durable", "worker", "tests.e2e.worker_command_app", "--db", children.url]
    worker = children.spawn([*command, "--concurrency", "4", "--log-level", "INFO"])
    until(lambda: ready(children, worker), 30, "the worker to start")
    return worker


def count_reads(engine: durable.Engine, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the time of every `get_run` the engine's backend serves from now on."""
    reads: list[float] = []
    original = engine.backend.get_run

    def get_run(run_id: str) -> Any:
        reads.append(time.monotonic())
        return original(run_id)

    monkeypatch.setattr(engine.backend, "get_run", get_run)
    return reads


def waited(engine: durable.Engine, seconds: float, run_id: str) -> float:
    """Dispatch `lasting(seconds)`, wait for it here; return how long after the run
    finished (by the database's clock) the wait returned."""
    handle = durable.dispatch(lasting, seconds, id=run_id)
    assert wait(handle, timeout=30) == seconds
    returned = time.time()
    finished_at = engine.reread(run_id).finished_at
    assert finished_at is not None
    return returned - finished_at


@pytest.mark.parametrize(
    "url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_postgres_waiter_is_woken_by_notify_from_a_worker_process(
    children: Children, engine: durable.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of 2.5 s finished by a worker process: the waiter here returns within
    0.25 s of the finish (a once-a-second re-read would take about 0.5 s: the run ends
    midway between two) and reads the run at most 4 times (first look, the re-reads at
    1 s and 2 s, and the one the notification prompts; one more per second the run
    started late)."""
    worker = start_worker(children)
    waited(engine, 0.0, "warm-up")  # also starts this process's LISTEN connection
    reads = count_reads(engine, monkeypatch)
    lag = waited(engine, 2.5, "long")
    during = len(reads) - 1  # the last read is `waited` fetching finished_at
    # A loaded machine may start the run late: one re-read per whole second waited.
    allowed = 2 + int(reads[-1] - reads[0])
    print(f"woken {lag * 1000:.1f} ms after the finish; {during} reads while waiting")
    assert lag < 0.25, f"the waiter woke {lag:.3f} s after the run finished"
    assert during <= allowed, f"{during} reads of the run in {reads[-1] - reads[0]:.1f} s"
    stop_all(children, [worker])


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_sqlite_waiter_polls_at_a_bounded_rate(
    children: Children, engine: durable.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQLite waiter cannot be notified by another process: it polls every 50 ms.
    For a run of 1.5 s it notices the finish within 0.25 s (a once-a-second re-read
    would take about 0.5 s) and reads the run about 30 times (a 1 ms busy loop would
    read it over a thousand times)."""
    worker = start_worker(children)
    waited(engine, 0.0, "warm-up")
    reads = count_reads(engine, monkeypatch)
    lag = waited(engine, 1.5, "long")
    during = len(reads) - 1
    span = reads[-2] - reads[0]
    print(f"noticed {lag * 1000:.1f} ms after the finish; {during} reads in {span:.2f} s")
    assert lag < 0.25, f"the waiter noticed {lag:.3f} s after the run finished"
    assert during <= 60, f"{during} reads of the run in about 1.5 s of waiting"
    stop_all(children, [worker])


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_task_dispatched_by_a_workflow_runs_on_a_worker(
    children: Children, engine: durable.Engine
) -> None:
    """The issue's ``h = dispatch(send_receipt.bind(...)); ...; wait(h)``: the task
    becomes its own run with the derived id ``parent/position``, a worker process runs
    its body once, and the workflow's wait(h) returns the result that run recorded."""
    worker = start_worker(children)
    handle = durable.dispatch(order, "o-17", id="order-o-17")
    result = wait(handle, timeout=30)
    assert result["label"] == "label-o-17"
    receipt = result["receipt"]
    assert receipt["sent"] == "receipt-o-17 to o-17"
    assert receipt["pid"] == worker.pid
    history = engine.backend.load_history("order-o-17")
    assert [step.kind for step in history] == [
        StepKind.TASK,  # charge
        StepKind.DISPATCH,  # send_receipt, in the background
        StepKind.WORKFLOW,  # ship_parcel, a child workflow waited for
        StepKind.JOIN,  # wait(h)
    ]
    dispatched = history[1]
    assert dispatched.name == send_receipt.name
    assert engine.load(dispatched.output or b"", "order-o-17", 1) == "order-o-17/1"
    background = engine.reread("order-o-17/1")
    assert background.workflow == send_receipt.name
    assert background.parent_id == "order-o-17"
    assert background.status is RunStatus.COMPLETED
    assert engine.outcome(background) == receipt
    bodies = [e for e in read_ledger(children.ledger) if e.run_id == "order-o-17/1"]
    assert [(e.position, e.pid, e.token) for e in bodies] == [(0, worker.pid, receipt["token"])]
    runs = {entry.run_id for entry in read_ledger(children.ledger)}
    assert runs == {"order-o-17", "order-o-17/1", "order-o-17/2"}
    stop_all(children, [worker])
