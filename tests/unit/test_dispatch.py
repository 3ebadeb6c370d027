"""dispatch, handles, wait and in-process workers, on the memory backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

import durable
from durable import RunStatus, StepKind, Worker, dispatch, execute, task, wait, workflow
from durable.errors import IdempotencyConflict, RunNotFound, WaitTimeout
from tests.unit.helpers import history, run


@pytest.fixture
def engine() -> Iterator[durable.Engine]:
    """A default engine on memory with short leases."""
    engine = durable.configure("memory://", lease=2.0)
    try:
        yield engine
    finally:
        engine.close()


@task
def double(n: int) -> int:
    return n * 2


@workflow
def twice(n: int) -> int:
    return double(n)


def test_dispatch_queues_a_run_that_a_worker_finishes(engine: durable.Engine) -> None:
    """A dispatched run waits QUEUED until a worker runs it; the handle gets the result."""
    handle = dispatch(twice, 21)
    assert handle.status() is RunStatus.QUEUED
    with pytest.raises(WaitTimeout):
        handle.result(timeout=0.1)
    with Worker(engine, poll=0.05):
        assert handle.result(timeout=5) == 42
    assert handle.status() is RunStatus.COMPLETED
    assert durable.get(handle.id) == handle
    assert wait(durable.get(handle.id)) == 42


def test_dispatch_by_id_is_idempotent(engine: durable.Engine) -> None:
    """The same id and call return the same run; another call with that id is refused."""
    first = dispatch(twice, 1, id="job-1")
    again = dispatch(twice, 1, id="job-1")
    assert first == again
    with pytest.raises(IdempotencyConflict):
        dispatch(twice, 2, id="job-1")
    with pytest.raises(IdempotencyConflict):
        dispatch(double, 1, id="job-1")
    assert len(engine.backend._runs) == 1  # type: ignore[attr-defined]


def test_concurrent_dispatches_make_one_run(engine: durable.Engine) -> None:
    """Many threads dispatching one id at once all get the same single run."""
    barrier = threading.Barrier(8)
    ids: list[str] = []

    def race() -> None:
        barrier.wait()
        ids.append(dispatch(twice, 5, id="contended").id)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ids == ["contended"] * 8
    assert len(engine.backend._runs) == 1  # type: ignore[attr-defined]


@pytest.mark.usefixtures("engine")
def test_get_unknown_run() -> None:
    """durable.get of an unknown id raises RunNotFound."""
    with pytest.raises(RunNotFound):
        durable.get("nope")


def test_workers_take_higher_priority_first(engine: durable.Engine) -> None:
    """With one slot, queued runs start in priority order, then oldest first."""
    started: list[str] = []

    @task
    def note(tag: str) -> None:
        started.append(tag)

    @workflow
    def job(tag: str) -> None:
        note(tag)

    for tag, priority in (("low-1", 0), ("urgent", 9), ("low-2", 0), ("normal", 5)):
        dispatch(job, tag, priority=priority, id=tag)
        time.sleep(0.002)
    with Worker(engine, concurrency=1, poll=0.05):
        for tag in ("low-1", "urgent", "low-2", "normal"):
            durable.get(tag).result(timeout=5)
    assert started == ["urgent", "normal", "low-1", "low-2"]


def test_workers_serve_only_their_queues(engine: durable.Engine) -> None:
    """A run dispatched to a queue nobody serves stays queued."""
    elsewhere = dispatch(twice, 1, queue="reports")
    here = dispatch(twice, 2)
    with Worker(engine, poll=0.05):
        assert here.result(timeout=5) == 4
        time.sleep(0.2)
        assert elsewhere.status() is RunStatus.QUEUED
        with Worker(engine, queues=["reports"], poll=0.05):
            assert elsewhere.result(timeout=5) == 2


def test_dispatch_inside_a_workflow_is_recorded_with_a_derived_id(engine: durable.Engine) -> None:
    """A workflow's dispatch takes a position; the child id derives from the parent's."""

    @workflow
    def parent(n: int) -> list[int]:
        handle = dispatch(twice, n)
        mine = double(n + 1)
        return [mine, wait(handle)]

    with Worker(engine, concurrency=4, poll=0.05):
        assert execute(parent, 3, id="p") == [8, 6]
    assert [s.kind for s in history("p")] == [StepKind.DISPATCH, StepKind.TASK, StepKind.JOIN]
    assert run("p/0").parent_id == "p"
    assert run("p/0").status is RunStatus.COMPLETED
    # Replay returns the recorded child id and outcome: no new child, no waiting.
    assert execute(parent, 3, id="p") == [8, 6]
    assert len(engine.backend._runs) == 2  # type: ignore[attr-defined]


def test_a_joined_childs_error_is_recorded_and_replayed(engine: durable.Engine) -> None:
    """wait(handle) on a failed child raises the child's error, recorded at the position."""

    @workflow
    def broken_child() -> None:
        raise KeyError("missing")

    @workflow
    def parent() -> str:
        try:
            wait(dispatch(broken_child))
        except KeyError as error:
            return f"child failed: {error}"
        return "no error"

    with Worker(engine, concurrency=4, poll=0.05):
        assert execute(parent, id="q") == "child failed: 'missing'"
    join = history("q")[1]
    assert join.kind is StepKind.JOIN and join.status.value == "failed"


def test_stop_hands_running_work_back(engine: durable.Engine) -> None:
    """Stopping a worker hands its run back at the next durable call; nothing re-runs."""
    bodies: list[int] = []
    release = threading.Event()

    @task
    def step(n: int) -> int:
        bodies.append(n)
        if n == 0:
            assert release.wait(5)
        return n

    @workflow
    def three() -> list[int]:
        return [step(0), step(1), step(2)]

    handle = dispatch(three)
    worker = Worker(engine, poll=0.05, grace=5).start()
    while not bodies:
        time.sleep(0.01)
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    time.sleep(0.1)
    release.set()  # step 0 finishes and is recorded; step 1 is never started here
    stopper.join(10)
    assert bodies == [0]
    assert handle.status() is RunStatus.QUEUED, "handed back, ready for another worker"
    with Worker(engine, poll=0.05):
        assert handle.result(timeout=5) == [0, 1, 2]
    assert bodies == [0, 1, 2], "the recorded step 0 was not run again"


def test_worker_rejects_bad_options(engine: durable.Engine) -> None:
    """Nonsense worker options fail at once with the reason."""
    with pytest.raises(durable.errors.ConfigurationError, match="concurrency"):
        Worker(engine, concurrency=0)
    with pytest.raises(durable.errors.ConfigurationError, match="queue"):
        Worker(engine, queues=[])
