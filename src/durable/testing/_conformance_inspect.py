"""The Backend contract of the operator surface, as executable checks: listing and
counting runs, outcomes for statistics, retrying failed runs, and the actions log."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable

from durable.backends import Backend
from durable.core.records import NewRun, RunQuery, RunStatus, StepKind, StepStatus

from ._conformance import OWNER, MakeBackend, _child, _new, _opened, _step


def _created(backend: Backend, new: NewRun) -> float:
    """Create *new*; return its created_at. Runs made one after another get distinct,
    increasing creation times (the clock may be coarse: wait until it moves)."""
    run, _ = backend.create_run(new)
    while backend.now() <= run.created_at:
        time.sleep(0.001)
    return run.created_at


def check_list_runs_newest_first_with_filters(make: MakeBackend) -> None:
    """list_runs returns matching runs newest first; every filter narrows; count_runs
    agrees; pages continue after the last run of the previous page."""
    with _opened(make) as backend:
        made = {}
        for i in range(6):
            new = dataclasses.replace(
                _new(f"r-{i}_x" if i % 2 else f"r-{i}", owner=None),
                workflow="app.even" if i % 2 == 0 else "app.odd",
                queue="q1" if i < 3 else "q2",
            )
            made[new.id] = _created(backend, new)
        backend.create_run(_child("r-5-child", "r-5_x", owner=OWNER))
        assert backend.finish_run("r-5-child", 1, RunStatus.FAILED, error=b"jnull")

        every = [run.id for run in backend.list_runs(RunQuery(), limit=100)]
        assert every == ["r-5-child", "r-5_x", "r-4", "r-3_x", "r-2", "r-1_x", "r-0"], every
        assert backend.count_runs(RunQuery()) == 7

        def ids(query: RunQuery, limit: int = 100) -> list[str]:
            found = [run.id for run in backend.list_runs(query, limit=limit)]
            assert backend.count_runs(query) == len(found) or limit < 100
            return found

        assert ids(RunQuery(workflow="app.even")) == ["r-4", "r-2", "r-0"]
        assert ids(RunQuery(statuses=(RunStatus.FAILED,))) == ["r-5-child"]
        assert ids(RunQuery(statuses=(RunStatus.FAILED, RunStatus.QUEUED)))[:2] == [
            "r-5-child",
            "r-5_x",
        ]
        assert ids(RunQuery(queue="q1", workflow="app.odd")) == ["r-1_x"]
        assert ids(RunQuery(since=made["r-2"], until=made["r-4"])) == ["r-3_x", "r-2"]
        assert ids(RunQuery(parent_id="r-5_x")) == ["r-5-child"]
        # The id search is a plain substring: "_" and "%" are not wildcards.
        assert ids(RunQuery(id_contains="_x")) == ["r-5_x", "r-3_x", "r-1_x"]
        assert ids(RunQuery(id_contains="%")) == []
        assert ids(RunQuery(id_contains="-5")) == ["r-5-child", "r-5_x"]

        pages: list[str] = []
        after = None
        while True:
            page = backend.list_runs(RunQuery(after=after), limit=3)
            pages += [run.id for run in page]
            if len(page) < 3:
                break
            after = (page[-1].created_at, page[-1].id)
        assert pages == every, pages
        assert backend.count_runs(RunQuery(after=(made["r-2"], "r-2"))) == 2


def check_outcomes_of_runs_and_tasks(make: MakeBackend) -> None:
    """outcomes lists finished runs and finished task steps (not other kinds, not
    unfinished ones), with their names, statuses and times, filtered by name."""
    with _opened(make) as backend:
        start = backend.now() - 1
        backend.create_run(_new("done"))
        backend.record(_step("done", 0, started_at=start + 0.5, finished_at=start + 0.75), 1)
        backend.record(
            _step(
                "done",
                1,
                name="app.flaky",
                status=StepStatus.FAILED,
                error=b"jnull",
                output=None,
                started_at=start + 0.5,
                finished_at=start + 0.9,
            ),
            1,
        )
        backend.record(_step("done", 2, kind=StepKind.NOW, started_at=start + 0.5), 1)
        backend.record(
            _step("done", 3, status=StepStatus.RETRYING, output=None, started_at=start + 0.5), 1
        )
        assert backend.finish_run("done", 1, RunStatus.COMPLETED, output=b"j1")
        backend.create_run(_new("live"))

        runs = backend.outcomes("run", since=start)
        assert [(o.name, o.status) for o in runs] == [("app.workflow", "completed")]
        assert runs[0].finished_at is not None and runs[0].started_at is not None
        assert runs[0].finished_at >= runs[0].started_at
        assert backend.outcomes("run", since=backend.now() + 60) == []
        tasks = sorted(backend.outcomes("task", since=start), key=lambda o: o.name)
        assert [(o.name, o.status) for o in tasks] == [
            ("app.flaky", "failed"),
            ("app.task", "completed"),
        ], tasks
        assert tasks[0].started_at == start + 0.5 and tasks[0].finished_at == start + 0.9
        named = backend.outcomes("task", since=start, name="app.flaky")
        assert [o.status for o in named] == ["failed"]
        assert backend.outcomes("run", since=start, name="app.other") == []


def check_retry_reopens_failed_steps_and_queues(make: MakeBackend) -> None:
    """retry_run deletes only the named FAILED steps, keeps finished ones, and queues a
    FAILED or DEAD run with no outcome; other runs are left as they are."""
    with _opened(make) as backend:
        backend.create_run(_new("failed"))
        backend.record(_step("failed", 0), 1)
        failed_step = _step("failed", 1, status=StepStatus.FAILED, output=None, error=b"jnull")
        backend.record(failed_step, 1)
        assert backend.finish_run("failed", 1, RunStatus.FAILED, error=b"j1")
        watch = backend.watch(["queue:default"])
        run = backend.retry_run("failed", [0, 1])
        assert run is not None and run.status is RunStatus.QUEUED
        assert run.error is None and run.finished_at is None and run.lease_owner is None
        assert [s.position for s in backend.load_history("failed")] == [0], "completed stays"
        assert watch.wait(1.0), "the queue is told"
        claimed = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=5, lease=30
        )
        assert [r.id for r in claimed] == ["failed"]
        assert claimed[0].epoch == 2

        backend.create_run(_new("ok"))
        assert backend.finish_run("ok", 1, RunStatus.COMPLETED, output=b"j1")
        unchanged = backend.retry_run("ok", [0])
        assert unchanged is not None and unchanged.status is RunStatus.COMPLETED
        assert backend.retry_run("missing", []) is None


def check_actions_log(make: MakeBackend) -> None:
    """record_action appends who did what and when; actions lists a run's, oldest
    first; purging the run deletes them."""
    with _opened(make) as backend:
        backend.create_run(_new("a"))
        backend.create_run(_new("b"))
        before = backend.now()
        first = backend.record_action("a", "cancel", actor="alice", detail='{"why": 1}')
        backend.record_action("b", "retry", actor=None, detail="{}")
        second = backend.record_action("a", "send", actor="bob", detail="{}")
        assert first.at >= before - 1 and second.id > first.id
        log = backend.actions("a")
        assert [(a.action, a.actor) for a in log] == [("cancel", "alice"), ("send", "bob")]
        assert json.loads(log[0].detail) == {"why": 1}
        assert backend.finish_run("a", 1, RunStatus.CANCELLED)
        time.sleep(0.01)
        assert backend.purge(finished_before=backend.now(), limit=10) == 1
        assert backend.actions("a") == []
        assert len(backend.actions("b")) == 1


INSPECT_CHECKS: tuple[Callable[[MakeBackend], None], ...] = (
    check_list_runs_newest_first_with_filters,
    check_outcomes_of_runs_and_tasks,
    check_retry_reopens_failed_steps_and_queues,
    check_actions_log,
)
