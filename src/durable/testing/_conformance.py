"""The Backend contracts as executable checks: what every check module shares.

Each check gets a fresh backend from the factory, exercises one contract of
`durable.backends.Backend`, and raises AssertionError with an explanation when the
backend breaks it. Lease expiry is exercised with real, short leases (a few hundred
milliseconds), so the suite works for backends whose clock is a database's.

The checks are grouped by the role of the storage seam they exercise:
_conformance_runs.py (`RunStore`), _conformance_history.py (`HistoryStore`),
_conformance_waits.py (`WaitStore`), _conformance_inspection.py (`InspectionStore`),
_conformance_control.py and _conformance_forks.py (`ControlStore`),
_conformance_schedules.py (`ScheduleStore`) and _conformance_queues.py (`QueueStore`);
_conformance_versions.py checks code versions across the claims and listings;
_conformance_outbox.py what `RunStore.create_run_in` refuses; _conformance_traces.py
and _conformance_event_schemas.py what every path that creates a run keeps;
_conformance_attributes.py run attributes (`AttributeStore`); _conformance_streams.py
streams (`StreamStore`); _suite.py runs them all
(`check_backend`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from durable.backends import Backend
from durable.core.records import NewRun, Run, Step, StepKind, StepStatus

MakeBackend = Callable[[], Backend]

OWNER = "check-host:1:1:aaaa"
OTHER = "check-host:2:2:bbbb"
SHORT_LEASE = 0.2
#: A time far enough ahead that nothing reaches it while a check runs.
FAR = 3600.0


@contextlib.contextmanager
def _opened(make: MakeBackend) -> Iterator[Backend]:
    backend = make()
    try:
        yield backend
    finally:
        backend.close()


def _new(run_id: str = "run-1", *, owner: str | None = OWNER, lease: float = 30.0) -> NewRun:
    return NewRun(
        id=run_id,
        workflow="app.workflow",
        input=b'j{"args":[1],"kwargs":{}}',
        call_hash="v1:00",
        owner=owner,
        lease=lease,
    )


def _queued(
    run_id: str, *, queue: str = "default", priority: int = 0, workflow: str = "app.workflow"
) -> NewRun:
    return NewRun(
        id=run_id,
        workflow=workflow,
        input=b"j[]",
        call_hash="v1:00",
        owner=None,
        lease=30,
        queue=queue,
        priority=priority,
    )


def _child(run_id: str, parent: str | None, *, owner: str | None) -> NewRun:
    return NewRun(
        id=run_id,
        workflow="app.workflow",
        input=b"j[]",
        call_hash="v1:00",
        owner=owner,
        lease=30,
        parent_id=parent,
    )


def _step(run_id: str, position: int, **fields: Any) -> Step:
    values: dict[str, Any] = {
        "run_id": run_id,
        "position": position,
        "kind": StepKind.TASK,
        "name": "app.task",
        "call_hash": f"v1:{position:02d}",
        "status": StepStatus.COMPLETED,
        "output": b"j%d" % position,
        "attempts": 1,
        "started_at": 1.0,
        "finished_at": 2.0,
        "epoch": 1,
    }
    values.update(fields)
    return Step(**values)


def _expire() -> None:
    time.sleep(SHORT_LEASE * 2)


def _get(backend: Backend, run_id: str) -> Run:
    run = backend.get_run(run_id)
    assert run is not None, f"run {run_id!r} must exist"
    return run


def _race(n: int, fn: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def work(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
