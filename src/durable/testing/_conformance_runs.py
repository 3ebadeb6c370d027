"""The Backend contracts of runs and leases (`RunStore`), as executable checks (see
`_conformance.py`): creating runs, finishing them, claiming them (one at a time and
from queues), releasing and cancelling them, leases and recovery, and the clock."""

from __future__ import annotations

import dataclasses
import time

from durable.core.records import NewRun, RunStatus, StepStatus
from durable.core.run_options import PRIORITY_MAX, PRIORITY_MIN

from ._conformance import (
    OTHER,
    OWNER,
    SHORT_LEASE,
    MakeBackend,
    _child,
    _expire,
    _get,
    _new,
    _opened,
    _queued,
    _race,
    _step,
)

# -- creating -----------------------------------------------------------------------


def check_create_run_once(make: MakeBackend) -> None:
    """create_run inserts a run once; later calls return the stored run unchanged."""
    with _opened(make) as backend:
        run, created = backend.create_run(_new())
        assert created, "the first create_run of an id must report created=True"
        assert run.status is RunStatus.RUNNING and run.epoch == 1
        assert run.lease_owner == OWNER and run.lease_until is not None
        assert run.lease_until > backend.now(), "a new run's lease must lie in the future"
        again, created = backend.create_run(
            NewRun(
                id="run-1",
                workflow="other",
                input=b"jnull",
                call_hash="v1:ff",
                owner=OTHER,
                lease=1,
            )
        )
        assert not created, "a second create_run of an id must report created=False"
        assert again.workflow == "app.workflow" and again.input == run.input, (
            "the stored run must not change"
        )
        assert again.lease_owner == OWNER


def check_create_run_returns_the_stored_parent(make: MakeBackend) -> None:
    """create_run of an existing id returns the run with the parent it was stored with,
    whatever parent the second call names: the engine tells a parent's own child from
    a foreign run holding its id by this (runs.create)."""
    with _opened(make) as backend:
        backend.create_run(_child("p/0", "p", owner=None))
        for parent in (None, "q", "p"):
            again, created = backend.create_run(_child("p/0", parent, owner=OWNER))
            assert not created and again.parent_id == "p", (
                f"create_run must return the stored parent 'p', got {again.parent_id!r}"
            )
        backend.create_run(_queued("x/0"))
        again, created = backend.create_run(_child("x/0", "x", owner=None))
        assert not created and again.parent_id is None, (
            "a run stored without a parent must come back without one"
        )


def check_create_queued_run(make: MakeBackend) -> None:
    """A run created without an owner is QUEUED at epoch 0 with no lease."""
    with _opened(make) as backend:
        run, _ = backend.create_run(_new(owner=None))
        assert run.status is RunStatus.QUEUED and run.epoch == 0
        assert run.lease_owner is None and run.lease_until is None


def check_get_run(make: MakeBackend) -> None:
    """get_run returns the stored run, or None for an unknown id; ids are exact strings."""
    with _opened(make) as backend:
        assert backend.get_run("nope") is None
        run_id = "ünïcode/id:1 with spaces"
        backend.create_run(_new(run_id))
        run = backend.get_run(run_id)
        assert run is not None and run.id == run_id
        assert backend.get_run(run_id.upper()) is None


def check_create_race(make: MakeBackend) -> None:
    """Of many concurrent create_run calls for one id, exactly one creates it."""
    with _opened(make) as backend:
        results = _race(8, lambda i: backend.create_run(_new("contended", owner=f"h:{i}:1:x"))[1])
        assert results.count(True) == 1, f"expected one creator, got {results.count(True)}"


# -- finishing ----------------------------------------------------------------------


def check_finish_run(make: MakeBackend) -> None:
    """finish_run is fenced by epoch, stores the outcome, drops the lease, happens once."""
    with _opened(make) as backend:
        backend.create_run(_new())
        assert not backend.finish_run("run-1", 7, RunStatus.COMPLETED, output=b"j1")
        assert backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"jresult")
        run = _get(backend, "run-1")
        assert run.status is RunStatus.COMPLETED and run.output == b"jresult"
        assert run.lease_owner is None and run.finished_at is not None
        assert not backend.finish_run("run-1", 1, RunStatus.FAILED, error=b"jx"), (
            "a finished run's outcome must never change"
        )
        assert _get(backend, "run-1").status is RunStatus.COMPLETED
        assert not backend.finish_run("unknown", 1, RunStatus.COMPLETED, output=b"j1")


def check_finish_failed(make: MakeBackend) -> None:
    """A FAILED outcome stores its error payload."""
    with _opened(make) as backend:
        backend.create_run(_new())
        assert backend.finish_run("run-1", 1, RunStatus.FAILED, error=b"jboom")
        run = _get(backend, "run-1")
        assert run.status is RunStatus.FAILED and run.error == b"jboom" and run.output is None


def check_run_deadline(make: MakeBackend) -> None:
    """A run keeps the deadline it was created with through claims, and ends TIMED_OUT
    like any other terminal status (its error stored, never changed again)."""
    with _opened(make) as backend:
        created, _ = backend.create_run(dataclasses.replace(_queued("late"), timeout=90.5))
        owned, _ = backend.create_run(dataclasses.replace(_new(), timeout=3.0))
        for run, timeout in ((created, 90.5), (owned, 3.0)):
            assert run.deadline_at is not None, "create_run must return the deadline"
            assert abs(run.deadline_at - (run.created_at + timeout)) < 1, (
                "a run's deadline is its timeout after its creation (by the backend's clock)"
            )
        assert _get(backend, "late").deadline_at == created.deadline_at
        assert _get(backend, "run-1").deadline_at == owned.deadline_at
        backend.create_run(_new("plain"))
        assert _get(backend, "plain").deadline_at is None, "no deadline unless given"
        (claimed,) = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=1, lease=30
        )
        assert claimed.deadline_at == created.deadline_at, "a claim keeps the deadline"
        assert backend.finish_run("late", 1, RunStatus.TIMED_OUT, error=b"jlate")
        run = _get(backend, "late")
        assert run.status is RunStatus.TIMED_OUT and run.error == b"jlate"
        assert run.finished_at is not None and run.lease_owner is None
        assert not backend.finish_run("late", 1, RunStatus.FAILED, error=b"jx"), (
            "a timed-out run's outcome must never change"
        )


def check_blocked_run_is_resumable(make: MakeBackend) -> None:
    """A BLOCKED run keeps its history, is recoverable, and can be claimed again."""
    with _opened(make) as backend:
        backend.create_run(_new())
        backend.record(_step("run-1", 0), 1)
        assert backend.finish_run("run-1", 1, RunStatus.BLOCKED, error=b"jdiverged")
        run = _get(backend, "run-1")
        assert run.status is RunStatus.BLOCKED and run.finished_at is None
        assert "run-1" in {r.id for r in backend.recoverable(host="nowhere")}
        claimed = backend.claim_run("run-1", owner=OTHER, lease=30, epoch=1)
        assert claimed is not None and claimed.status is RunStatus.RUNNING
        assert claimed.epoch == 2 and claimed.recoveries == 0
        assert len(backend.load_history("run-1")) == 1


# -- claiming -----------------------------------------------------------------------


def check_claim_respects_live_lease(make: MakeBackend) -> None:
    """A RUNNING run with a live lease cannot be claimed, unless its owner is named dead."""
    with _opened(make) as backend:
        backend.create_run(_new())
        assert backend.claim_run("run-1", owner=OTHER, lease=30, epoch=1) is None
        assert backend.claim_run("run-1", owner=OTHER, lease=30, epoch=1, dead_owner=OTHER) is None
        claimed = backend.claim_run("run-1", owner=OTHER, lease=30, epoch=1, dead_owner=OWNER)
        assert claimed is not None and claimed.lease_owner == OTHER and claimed.epoch == 2
        assert claimed.recoveries == 1, "taking over a RUNNING run counts a recovery"


def check_mark_progress(make: MakeBackend) -> None:
    """mark_progress resets the recovery count, fenced by epoch."""
    with _opened(make) as backend:
        backend.create_run(_new(lease=SHORT_LEASE))
        _expire()
        claimed = backend.claim_run("run-1", owner=OTHER, lease=SHORT_LEASE, epoch=1)
        assert claimed is not None and claimed.recoveries == 1
        backend.mark_progress("run-1", 1)  # a stale owner changes nothing
        assert _get(backend, "run-1").recoveries == 1
        backend.mark_progress("run-1", 2)
        assert _get(backend, "run-1").recoveries == 0


def check_claim_expired_lease(make: MakeBackend) -> None:
    """Once a lease expires, any owner may claim the run at its current epoch, once."""
    with _opened(make) as backend:
        backend.create_run(_new(lease=SHORT_LEASE))
        _expire()
        assert backend.claim_run("run-1", owner=OTHER, lease=30, epoch=0) is None, "stale epoch"
        claimed = backend.claim_run("run-1", owner=OTHER, lease=30, epoch=1)
        assert claimed is not None and claimed.epoch == 2 and claimed.lease_owner == OTHER
        assert claimed.lease_until is not None and claimed.lease_until > backend.now() + 10
        assert backend.claim_run("run-1", owner=OWNER, lease=30, epoch=1) is None


def check_claim_queued_and_finished(make: MakeBackend) -> None:
    """QUEUED runs are claimable at once; finished runs never are."""
    with _opened(make) as backend:
        backend.create_run(_new("queued", owner=None))
        claimed = backend.claim_run("queued", owner=OWNER, lease=30, epoch=0)
        assert claimed is not None and claimed.epoch == 1 and claimed.recoveries == 0
        backend.create_run(_new("done"))
        backend.finish_run("done", 1, RunStatus.COMPLETED, output=b"j1")
        assert backend.claim_run("done", owner=OTHER, lease=30, epoch=1, dead_owner=OWNER) is None
        assert backend.claim_run("missing", owner=OTHER, lease=30, epoch=0) is None


def check_claim_race(make: MakeBackend) -> None:
    """Of many concurrent claims of one expired run, exactly one succeeds."""
    with _opened(make) as backend:
        backend.create_run(_new(lease=SHORT_LEASE))
        _expire()
        results = _race(
            8, lambda i: backend.claim_run("run-1", owner=f"h:{i}:1:x", lease=30, epoch=1)
        )
        winners = [r for r in results if r is not None]
        assert len(winners) == 1, f"expected one winner, got {len(winners)}"
        assert _get(backend, "run-1").lease_owner == winners[0].lease_owner


def check_release_run(make: MakeBackend) -> None:
    """A released run is QUEUED again, claimable at once without counting a recovery."""
    with _opened(make) as backend:
        backend.create_run(_new())
        assert not backend.release_run("run-1", 5), "release is fenced by epoch"
        assert backend.release_run("run-1", 1)
        run = _get(backend, "run-1")
        assert run.status is RunStatus.QUEUED and run.lease_owner is None
        assert run.started_at is not None, "it was started before; recover() must see it"
        assert "run-1" in {r.id for r in backend.recoverable(host="nowhere")}
        (claimed,) = backend.claim_next(
            owner=OTHER, queue="default", workflows=["app.workflow"], limit=5, lease=30
        )
        assert claimed.id == "run-1" and claimed.epoch == 2 and claimed.recoveries == 0


# -- leases and recovery ------------------------------------------------------------


def check_renew_leases(make: MakeBackend) -> None:
    """renew_leases extends every RUNNING run of one owner, and only those."""
    with _opened(make) as backend:
        backend.create_run(_new("mine-1", lease=SHORT_LEASE))
        backend.create_run(_new("mine-2", lease=SHORT_LEASE))
        backend.create_run(_new("theirs", owner=OTHER, lease=SHORT_LEASE))
        backend.create_run(_new("done", lease=SHORT_LEASE))
        backend.finish_run("done", 1, RunStatus.COMPLETED, output=b"j1")
        assert backend.renew_leases(OWNER, 60) == 2
        _expire()
        assert backend.claim_run("mine-1", owner=OTHER, lease=30, epoch=1) is None, (
            "a renewed lease must still be live"
        )
        assert backend.claim_run("theirs", owner=OWNER, lease=30, epoch=1) is not None


def check_recoverable(make: MakeBackend) -> None:
    """recoverable lists blocked runs, expired leases and runs owned on the given host."""
    with _opened(make) as backend:
        backend.create_run(_new("expired", lease=SHORT_LEASE))
        backend.create_run(_new("live-elsewhere", owner="far:9:9:x", lease=60))
        backend.create_run(_new("live-here", owner="here:9:9:x", lease=60))
        backend.create_run(_new("queued", owner=None))
        backend.create_run(_new("released"))
        backend.release_run("released", 1)
        backend.create_run(_new("blocked"))
        backend.finish_run("blocked", 1, RunStatus.BLOCKED, error=b"jx")
        backend.create_run(_new("done", lease=SHORT_LEASE))
        backend.finish_run("done", 1, RunStatus.COMPLETED, output=b"j1")
        _expire()
        found = {run.id for run in backend.recoverable(host="here")}
        assert found == {"expired", "live-here", "blocked", "released"}, found


def check_now(make: MakeBackend) -> None:
    """now() is the backend's clock: it moves forward and lease deadlines are measured by it."""
    with _opened(make) as backend:
        first = backend.now()
        run, _ = backend.create_run(_new(lease=5))
        assert run.lease_until is not None and abs(run.lease_until - (first + 5)) < 2
        time.sleep(0.01)
        assert backend.now() >= first


# -- queues -------------------------------------------------------------------------


def check_claim_next_order_and_filters(make: MakeBackend) -> None:
    """claim_next takes the highest priority first, then the oldest, of one queue."""
    with _opened(make) as backend:
        for run_id, priority in (("low-old", 0), ("high", 5), ("low-new", 0), ("mid", 1)):
            backend.create_run(_queued(run_id, priority=priority))
            time.sleep(0.002)  # distinct creation times
        backend.create_run(_queued("other-queue", queue="emails", priority=9))
        backend.create_run(_queued("unknown-code", priority=9, workflow="app.newer"))
        claimed = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=3, lease=30
        )
        assert [run.id for run in claimed] == ["high", "mid", "low-old"]
        for run in claimed:
            assert run.status is RunStatus.RUNNING and run.epoch == 1
            assert run.lease_owner == OWNER and run.started_at is not None
        rest = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=10, lease=30
        )
        assert [run.id for run in rest] == ["low-new"], "the unknown workflow stays queued"
        other = backend.claim_next(
            owner=OWNER, queue="emails", workflows=["app.workflow"], limit=10, lease=30
        )
        assert [run.id for run in other] == ["other-queue"]
        assert backend.queued_workflows(["default"]) == ["app.newer"]
        assert backend.queued_workflows(["emails"]) == []


def check_claim_next_priorities_at_the_int4_limits(make: MakeBackend) -> None:
    """Priorities use the whole int4 range: stored exactly, claimed highest first."""
    with _opened(make) as backend:
        for run_id, priority in (("bottom", PRIORITY_MIN), ("zero", 0), ("top", PRIORITY_MAX)):
            run, _ = backend.create_run(_queued(run_id, priority=priority))
            assert run.priority == priority
            assert _get(backend, run_id).priority == priority, "a priority must round-trip"
        claimed = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=3, lease=30
        )
        assert [run.id for run in claimed] == ["top", "zero", "bottom"]


def check_claim_next_race(make: MakeBackend) -> None:
    """Concurrent claim_next calls never claim the same run twice."""
    with _opened(make) as backend:
        for i in range(40):
            backend.create_run(_queued(f"q{i:02d}"))
        results = _race(
            8,
            lambda i: backend.claim_next(
                owner=f"h:{i}:1:x",
                queue="default",
                workflows=["app.workflow"],
                limit=7,
                lease=30,
            ),
        )
        ids = [run.id for batch in results for run in batch]
        assert len(ids) == len(set(ids)) == 40, f"{len(ids)} claims of {len(set(ids))} runs"


# -- cancellation -------------------------------------------------------------------


def check_cancel_tree(make: MakeBackend) -> None:
    """cancel_run stops queued descendants at once and asks running ones to stop."""
    with _opened(make) as backend:
        backend.create_run(_new("root"))
        backend.create_run(_child("root/0", "root", owner=OWNER))
        backend.create_run(_child("root/1", "root", owner=None))
        backend.create_run(_child("root/0/2", "root/0", owner=None))
        backend.create_run(_child("root/3", "root", owner=OWNER))
        backend.finish_run("root/3", 1, RunStatus.COMPLETED, output=b"j1")
        backend.create_run(_new("bystander", owner=None))
        backend.record(_step("root", 1, status=StepStatus.RETRYING, output=None), 1)
        root = backend.cancel_run("root")
        assert root is not None and root.cancel_requested and root.status is RunStatus.RUNNING
        assert _get(backend, "root/0").cancel_requested
        assert _get(backend, "root/1").status is RunStatus.CANCELLED
        assert _get(backend, "root/0/2").status is RunStatus.CANCELLED, "grandchildren too"
        assert _get(backend, "root/3").status is RunStatus.COMPLETED, "finished runs stay"
        assert _get(backend, "bystander").status is RunStatus.QUEUED
        assert backend.cancel_run("missing") is None
        _, flag = backend.record(_step("root", 0), 1)
        assert flag, "record reports the cancellation request to the owner"
        _, flag = backend.record(_step("root", 1), 1)
        assert flag, "also when it replaces an attempt that will be retried"
        kept = [(s.position, s.status) for s in backend.load_history("root")]
        assert kept == [(0, StepStatus.COMPLETED), (1, StepStatus.COMPLETED)], (
            "a run with a cancel request still records the steps that finished"
        )
        done = backend.cancel_run("root/3")
        assert done is not None and done.status is RunStatus.COMPLETED
