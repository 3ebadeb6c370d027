"""A known workload for the metrics tests: runs that complete, fail, retry and are
cancelled, and runs left queued in two queues no worker serves. Imported by the tests
and by ``durable worker`` subprocesses (tests/e2e/test_metrics_worker.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import durable
from durable import RunStatus, task, workflow
from durable.core.records import RunQuery, StepKind, StepStatus

#: keys whose first attempt of `flaky` already failed, in this process.
_failed_once: set[str] = set()


@task
def add(n: int) -> int:
    return n + 1


@task(retry=dict(attempts=2, initial=0))
def boom() -> None:
    raise ValueError("boom")


@task(retry=dict(attempts=3, initial=0))
def flaky(key: str) -> str:
    if key not in _failed_once:
        _failed_once.add(key)
        raise RuntimeError("the first attempt fails")
    return key


@workflow
def fine(n: int) -> int:
    return add(add(n))


@workflow
def doomed() -> None:
    boom()


@workflow
def retried(key: str) -> str:
    return flaky(key)


@workflow
def waiter() -> Any:
    return durable.wait("go")


def dispatch_workload(engine: durable.Engine) -> list[str]:
    """Dispatch the workload; the ids of the runs on the default queue, and the waiter's
    (``waiter``: cancel it once it waits)."""
    _failed_once.clear()  # each retried run's first attempt fails, again
    ids = []
    for n in range(3):
        ids.append(engine.dispatch_call(fine.bind(n), run_id=f"fine-{n}").id)
    for n in range(2):
        ids.append(engine.dispatch_call(doomed.bind(), run_id=f"doomed-{n}").id)
    for n in range(2):
        ids.append(engine.dispatch_call(retried.bind(f"r{n}"), run_id=f"retried-{n}").id)
    ids.append(engine.dispatch_call(waiter.bind(), run_id="waiter").id)
    for n in range(2):
        engine.dispatch_call(fine.bind(10 + n), run_id=f"held-a{n}", queue="held-a")
    engine.dispatch_call(fine.bind(20), run_id="held-b0", queue="held-b")
    return ids


def settled(engine: durable.Engine) -> Callable[[], bool]:
    """Whether the default queue's runs are all finished, but for the waiter waiting."""

    def check() -> bool:
        runs = engine.backend.list_runs(RunQuery(queue="default"), limit=100)
        return len(runs) == 8 and all(
            run.status.finished or (run.id == "waiter" and run.status is RunStatus.WAITING)
            for run in runs
        )

    return check


def database_counts(engine: durable.Engine) -> dict[str, Counter[tuple[str, ...]]]:
    """What the database says, in the metrics' terms: runs created, started and
    finished by workflow (and status); task attempts by task and outcome."""
    runs = engine.backend.list_runs(RunQuery(), limit=1000)
    counts: dict[str, Counter[tuple[str, ...]]] = {
        "created": Counter((run.workflow,) for run in runs),
        "started": Counter((run.workflow,) for run in runs if run.started_at is not None),
        "finished": Counter(
            (run.workflow, run.status.value) for run in runs if run.status.finished
        ),
        "attempts": Counter(),
    }
    for run in runs:
        for step in engine.backend.load_history(run.id):
            if step.kind is not StepKind.TASK:
                continue
            done = step.status is StepStatus.COMPLETED
            counts["attempts"][(step.name, "completed")] += int(done)
            counts["attempts"][(step.name, "failed")] += step.attempts - int(done)
    counts["attempts"] = +counts["attempts"]  # no zero counts
    return counts
