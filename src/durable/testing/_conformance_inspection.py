"""The Backend contracts of the operator's side (`InspectionStore`), as executable
checks (see `_conformance.py`): listing and counting runs, outcomes for statistics,
retrying failed runs, the actions log, and purging old finished runs.

A purge deletes old finished runs with their history and events, and nothing that a
live run may still need: not the children of a live parent (its replay reads them),
not the ancestors of a live run (cancelling them must reach it), not a run that
finished after the cutoff, and never an unfinished run, however old.
"""

from __future__ import annotations

import dataclasses
import json
import time

from durable.backends import Backend
from durable.core.records import NewRun, RunQuery, RunStatus, StepKind, StepStatus

from ._conformance import FAR, OWNER, MakeBackend, _child, _new, _opened, _race, _step

# -- listing, statistics, retries and actions ---------------------------------------


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
    """outcomes lists runs, finished or not, and finished task steps (not other kinds,
    not unfinished ones), with their names, statuses and times, filtered by name, and
    task steps by their run's workflow."""
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

        runs = sorted(backend.outcomes("run", since=start), key=lambda o: o.status)
        assert [(o.name, o.status) for o in runs] == [
            ("app.workflow", "completed"),
            ("app.workflow", "running"),  # "live": created owned, unfinished
        ]
        assert runs[0].finished_at is not None and runs[0].started_at is not None
        assert runs[0].finished_at >= runs[0].started_at
        assert runs[1].finished_at is None
        assert backend.outcomes("run", since=backend.now() + 60) == []
        tasks = sorted(backend.outcomes("task", since=start), key=lambda o: o.name)
        assert [(o.name, o.status) for o in tasks] == [
            ("app.flaky", "failed"),
            ("app.task", "completed"),
        ], tasks
        assert tasks[0].started_at == start + 0.5 and tasks[0].finished_at == start + 0.9
        named = backend.outcomes("task", since=start, name="app.flaky")
        assert [o.status for o in named] == ["failed"]
        of_workflow = backend.outcomes("task", since=start, workflow="app.workflow")
        assert sorted(o.name for o in of_workflow) == ["app.flaky", "app.task"]
        assert backend.outcomes("task", since=start, workflow="app.other") == []
        both = backend.outcomes("task", since=start, workflow="app.workflow", name="app.task")
        assert [o.name for o in both] == ["app.task"]
        assert backend.outcomes("run", since=start, name="app.other") == []


def check_retry_reopens_failed_steps_and_queues(make: MakeBackend) -> None:
    """retry_run deletes only the named FAILED steps, keeps finished ones, and queues a
    FAILED or DEAD run with no outcome (nor the properties its end stored: its steps'
    come first again); other runs are left as they are."""
    with _opened(make) as backend:
        backend.create_run(_new("failed"))
        backend.record(_step("failed", 0, state=b'j{"a":0}'), 1)
        failed_step = _step("failed", 1, status=StepStatus.FAILED, output=None, error=b"jnull")
        backend.record(failed_step, 1)
        assert backend.finish_run("failed", 1, RunStatus.FAILED, error=b"j1", state=b'j{"a":9}')
        watch = backend.watch(["queue:default"])
        run = backend.retry_run("failed", [0, 1])
        assert run is not None and run.status is RunStatus.QUEUED
        assert run.error is None and run.finished_at is None and run.lease_owner is None
        assert run.state is None and backend.state("failed") == (b'j{"a":0}',)
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


def check_retry_keeps_the_outcomes_it_erases(make: MakeBackend) -> None:
    """The failure a retry erases, and the failed task calls it reopens, stay in
    outcomes marked retried (filtered like the others); purging the run drops them."""
    with _opened(make) as backend:
        start = backend.now() - 1
        backend.create_run(_new("r"))
        backend.record(_step("r", 0, started_at=start + 0.1, finished_at=start + 0.2), 1)
        failed = _step(
            "r",
            1,
            name="app.flaky",
            status=StepStatus.FAILED,
            output=None,
            error=b"jnull",
            started_at=start + 0.3,
            finished_at=start + 0.4,
        )
        backend.record(failed, 1)
        assert backend.finish_run("r", 1, RunStatus.FAILED, error=b"j1")
        assert backend.retry_run("r", [1]) is not None

        def seen(kind: str, **filters: str) -> list[tuple[str, str, bool]]:
            found = backend.outcomes(kind, since=start, **filters)  # type: ignore[arg-type]
            return sorted((o.name, o.status, o.retried) for o in found)

        assert seen("run") == [
            ("app.workflow", "failed", True),
            ("app.workflow", "queued", False),
        ]
        assert seen("task") == [("app.flaky", "failed", True), ("app.task", "completed", False)]
        assert seen("task", name="app.flaky") == [("app.flaky", "failed", True)]
        assert seen("task", workflow="app.workflow") == seen("task")
        assert seen("task", workflow="app.other") == []
        assert seen("run", name="app.other") == []
        kept = [o for o in backend.outcomes("task", since=start) if o.retried]
        assert (kept[0].started_at, kept[0].finished_at) == (start + 0.3, start + 0.4)
        assert backend.outcomes("task", since=start + 0.35) == [], "by start, like the rest"
        # Finished again, and purged: its kept attempts go with it.
        (claimed,) = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=5, lease=30
        )
        assert backend.finish_run("r", claimed.epoch, RunStatus.COMPLETED, output=b"j1")
        assert backend.purge(finished_before=backend.now() + 1, limit=10) == 1
        assert backend.outcomes("run", since=start) == []
        assert backend.outcomes("task", since=start) == []


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


# -- purging ------------------------------------------------------------------------


def _finished(backend: Backend, run_id: str, *, parent: str | None = None) -> None:
    """Create run *run_id* (a child of *parent*), record two steps, and complete it."""
    backend.create_run(_new(run_id) if parent is None else _child(run_id, parent, owner=OWNER))
    backend.record(_step(run_id, 0), 1)
    backend.record(_step(run_id, 1), 1)
    assert backend.finish_run(run_id, 1, RunStatus.COMPLETED, output=b"j1")


def _cutoff(backend: Backend) -> float:
    """A moment after everything finished so far, and before anything finished later."""
    time.sleep(0.02)
    cutoff = backend.now()
    time.sleep(0.02)
    return cutoff


def _gone(backend: Backend, run_id: str) -> bool:
    return (
        backend.get_run(run_id) is None
        and not backend.load_history(run_id)
        and not backend.events(run_id)
    )


def _kept(backend: Backend, run_id: str) -> bool:
    return backend.get_run(run_id) is not None


def check_purge_old_finished_runs(make: MakeBackend) -> None:
    """purge deletes runs finished before the cutoff, whatever their ending, with their
    history and events; it keeps newer and unfinished runs, and their rows."""
    with _opened(make) as backend:
        _finished(backend, "completed")
        backend.create_run(_new("waited"))
        backend.suspend_run("waited", 1, wake_at=None, waiting_on="event:go")
        backend.send_event("waited", "go", b"j1")
        backend.send_event("waited", "other", b"j2")
        claimed = backend.claim_run("waited", owner=OWNER, lease=30, epoch=1)
        assert claimed is not None
        backend.finish_run("waited", 2, RunStatus.FAILED, error=b"jerr")
        backend.create_run(_new("cancelled", owner=None))
        backend.cancel_run("cancelled")
        backend.create_run(_new("dead"))
        backend.finish_run("dead", 1, RunStatus.DEAD, error=b"jdead")
        # Old, but not finished:
        backend.create_run(_new("running"))
        backend.create_run(_new("queued", owner=None))
        backend.create_run(_new("sleeping"))
        backend.suspend_run("sleeping", 1, wake_at=backend.now() + FAR, waiting_on=None)
        backend.create_run(_new("blocked"))
        backend.record(_step("blocked", 0), 1)
        backend.finish_run("blocked", 1, RunStatus.BLOCKED, error=b"jdiverged")
        cutoff = _cutoff(backend)
        _finished(backend, "recent")

        assert backend.purge(finished_before=cutoff, limit=100, dry_run=True) == 4, (
            "a dry run counts the 4 old finished runs"
        )
        assert _kept(backend, "completed"), "a dry run deletes nothing"
        assert backend.purge(finished_before=cutoff, limit=100) == 4
        for run_id in ("completed", "waited", "cancelled", "dead"):
            assert _gone(backend, run_id), f"{run_id!r}: the run, its history and events go"
        for run_id in ("running", "queued", "sleeping", "blocked", "recent"):
            assert _kept(backend, run_id), f"{run_id!r} must stay"
        assert len(backend.load_history("recent")) == 2, "kept runs keep their history"
        assert len(backend.load_history("blocked")) == 1
        assert backend.purge(finished_before=cutoff, limit=100) == 0, "nothing else may go"


def check_purge_keeps_what_live_runs_need(make: MakeBackend) -> None:
    """A finished child of a live parent stays, and so does a finished parent (and its
    parents) of a live run; a finished tree goes whole."""
    with _opened(make) as backend:
        # A live parent: its finished children stay (its replay reads them).
        backend.create_run(_new("live"))
        _finished(backend, "live/0", parent="live")
        backend.create_run(_new("parked"))
        _finished(backend, "parked/0", parent="parked")
        backend.suspend_run("parked", 1, wake_at=backend.now() + FAR, waiting_on=None)
        # A finished root whose grandchild still runs: the whole line stays; a
        # finished sibling line of it may go.
        _finished(backend, "root")
        _finished(backend, "root/0", parent="root")
        backend.create_run(_child("root/0/0", "root/0", owner=OWNER))
        _finished(backend, "root/1", parent="root")
        _finished(backend, "root/1/0", parent="root/1")
        # A finished tree: everything goes.
        _finished(backend, "tree")
        _finished(backend, "tree/0", parent="tree")
        _finished(backend, "tree/0/0", parent="tree/0")
        # A finished tree with one member that finished after the cutoff: all stay.
        _finished(backend, "late")
        backend.create_run(_child("late/0", "late", owner=OWNER))
        cutoff = _cutoff(backend)
        backend.finish_run("late/0", 1, RunStatus.COMPLETED, output=b"j1")

        deleted = backend.purge(finished_before=cutoff, limit=100)
        for run_id in ("live", "live/0", "parked", "parked/0"):
            assert _kept(backend, run_id), f"{run_id!r}: a live parent keeps its children"
        for run_id in ("root", "root/0", "root/0/0"):
            assert _kept(backend, run_id), f"{run_id!r}: a live run keeps the runs above it"
        for run_id in ("late", "late/0"):
            assert _kept(backend, run_id), f"{run_id!r}: a run finished after the cutoff"
        for run_id in ("root/1", "root/1/0", "tree", "tree/0", "tree/0/0"):
            assert _gone(backend, run_id), f"{run_id!r}: its whole line finished long ago"
        assert deleted == 5, f"5 runs may go, {deleted} were deleted"
        assert len(backend.load_history("live/0")) == 2


def check_purge_batches(make: MakeBackend) -> None:
    """purge deletes at most *limit* runs per call, oldest first, and finds the runs
    that may go behind any number of old runs that must stay."""
    with _opened(make) as backend:
        backend.create_run(_new("parent"))
        for i in range(5):  # old, finished, but children of a live parent
            _finished(backend, f"parent/{i}", parent="parent")
        for i in range(7):
            _finished(backend, f"old-{i}")
        cutoff = _cutoff(backend)
        assert backend.purge(finished_before=cutoff, limit=3) == 3
        assert [_kept(backend, f"old-{i}") for i in range(7)] == [False] * 3 + [True] * 4, (
            "the oldest go first"
        )
        assert backend.purge(finished_before=cutoff, limit=3) == 3
        assert backend.purge(finished_before=cutoff, limit=3) == 1
        assert backend.purge(finished_before=cutoff, limit=3) == 0
        assert all(_kept(backend, f"parent/{i}") for i in range(5))
        assert backend.create_run(_new("old-0"))[1], "a purged run's id can be used again"
        assert list(backend.load_history("old-0")) == [], "and the new run has no history"


def check_purge_race(make: MakeBackend) -> None:
    """Concurrent purges delete each run once: their counts add up to the runs deleted."""
    with _opened(make) as backend:
        for i in range(30):
            _finished(backend, f"r{i}")
        cutoff = _cutoff(backend)
        counts = _race(4, lambda _: backend.purge(finished_before=cutoff, limit=7))
        counts += _race(4, lambda _: backend.purge(finished_before=cutoff, limit=7))
        while (more := backend.purge(finished_before=cutoff, limit=7)) > 0:
            counts.append(more)
        assert all(backend.get_run(f"r{i}") is None for i in range(30))
        assert sum(counts) == 30, f"30 runs were deleted, the purges counted {counts}"
