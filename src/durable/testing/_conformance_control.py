"""The Backend contracts of control (`ControlStore`) and of ``on_event`` inboxes, as
executable checks (see `_conformance.py`).

Pausing a tree of runs (queued and waiting ones at once, running ones at their owner's
next write), parking, resuming, reopening a cancelled run, and how a pause meets a
cancel request; then the inbox of a workflow class that takes any event.
"""

from __future__ import annotations

import time

from durable.core.records import (
    CANCEL_REQUEST,
    PAUSE_REQUEST,
    RunStatus,
    StepKind,
    StepStatus,
)

from ._conformance import FAR, OWNER, MakeBackend, _child, _get, _new, _opened, _step


def check_pause_and_resume_a_tree(make: MakeBackend) -> None:
    """pause_run stops queued and waiting runs at once (keeping what they wait for)
    and asks running ones; paused runs are never claimed or woken; park_run stops the
    owner's run; resume_run queues them all again."""
    with _opened(make) as backend:
        backend.create_run(_new("root"))  # RUNNING, epoch 1
        backend.create_run(_child("root/0", "root", owner=None))  # QUEUED
        backend.create_run(_child("root/1", "root", owner=OWNER))
        now = backend.now()
        backend.suspend_run("root/1", 1, wake_at=now + 0.2, waiting_on="event:go")
        backend.create_run(_new("alone", owner=None))
        root = backend.pause_run("root")
        assert root is not None and root.status is RunStatus.RUNNING and root.pause_requested
        assert not root.cancel_requested
        queued, waiting = _get(backend, "root/0"), _get(backend, "root/1")
        assert queued.status is RunStatus.PAUSED and waiting.status is RunStatus.PAUSED
        assert waiting.waiting_on == "event:go" and waiting.wake_at is not None, "kept"
        time.sleep(0.3)
        assert backend.wake_due(limit=10) == 0, "a paused run's timer does not fire"
        backend.send_event("root/1", "go", b"j1")
        assert _get(backend, "root/1").status is RunStatus.PAUSED, "nor does an event wake it"
        claimed = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=10, lease=30
        )
        assert [run.id for run in claimed] == ["alone"], "paused runs are never claimed"
        # The owner learns of the request as it writes, and a heartbeat is not refused.
        start = _step("root", 0, status=StepStatus.RUNNING, output=None, finished_at=None)
        _, requests = backend.record(start, 1)
        assert requests == PAUSE_REQUEST, f"record brings the pause request back: {requests}"
        assert backend.heartbeat("root", 0, 1, 1, None) is False, "a pause lets a task finish"
        _, requests = backend.record(_step("root", 0), 1)
        assert requests == PAUSE_REQUEST
        assert backend.park_run("root", 7) is None, "park_run is fenced by the epoch"
        assert backend.park_run("root", 1) is RunStatus.PAUSED
        parked = _get(backend, "root")
        assert parked.lease_owner is None and not parked.pause_requested
        resumed = backend.resume_run("root")
        assert resumed is not None and resumed.status is RunStatus.QUEUED
        for run_id in ("root/0", "root/1"):
            run = _get(backend, run_id)
            assert run.status is RunStatus.QUEUED, f"{run_id} is resumed with its parent"
            assert run.wake_at is None and run.waiting_on is None
        assert backend.pause_run("missing") is None and backend.resume_run("missing") is None


def check_cancelling_lists_the_owners_runs_asked_to_cancel(make: MakeBackend) -> None:
    """cancelling(owner) lists the RUNNING runs leased to *owner* with a cancel request:
    not another owner's, not a pause request, not a run that is no longer running."""
    with _opened(make) as backend:
        backend.create_run(_new("mine"))
        backend.create_run(_new("paused-only"))
        backend.create_run(_new("theirs", owner="someone-else"))
        backend.create_run(_new("idle"))
        assert list(backend.cancelling(OWNER)) == [], "nothing asked yet"
        backend.cancel_run("mine")
        backend.pause_run("paused-only")
        backend.cancel_run("theirs")
        assert list(backend.cancelling(OWNER)) == ["mine"]
        assert list(backend.cancelling("someone-else")) == ["theirs"]
        backend.finish_run("mine", 1, RunStatus.CANCELLED)
        assert list(backend.cancelling(OWNER)) == [], "an ended run is not listed"


def check_pause_meets_resume_and_cancel(make: MakeBackend) -> None:
    """A pause withdrawn before the owner parks leaves the run queued; a cancel request
    outranks a pause (it clears it, and a run being cancelled is not paused); a paused
    run that never started is cancelled at once, one that started is queued to see
    Cancelled; finished runs are untouched."""
    with _opened(make) as backend:
        backend.create_run(_new("run-1"))
        backend.pause_run("run-1")
        assert backend.resume_run("run-1") is not None
        assert not _get(backend, "run-1").pause_requested
        _, requests = backend.record(_step("run-1", 0), 1)
        assert requests == 0, "nothing is asked any more"
        assert backend.park_run("run-1", 1) is RunStatus.QUEUED, "withdrawn: it goes on"

        backend.create_run(_new("run-2"))
        backend.pause_run("run-2")
        cancelled = backend.cancel_run("run-2")
        assert cancelled is not None and cancelled.cancel_requested
        assert not cancelled.pause_requested, "a cancel request clears a pause request"
        _, requests = backend.record(_step("run-2", 0), 1)
        assert requests == CANCEL_REQUEST
        after = backend.pause_run("run-2")
        assert after is not None and not after.pause_requested, "being cancelled: no pause"

        backend.create_run(_new("never", owner=None))
        backend.pause_run("never")
        assert _get(backend, "never").status is RunStatus.PAUSED
        backend.cancel_run("never")
        assert _get(backend, "never").status is RunStatus.CANCELLED, "it never started"

        backend.create_run(_new("started"))
        backend.suspend_run("started", 1, wake_at=backend.now() + FAR, waiting_on=None)
        backend.pause_run("started")
        backend.cancel_run("started")
        run = _get(backend, "started")
        assert run.status is RunStatus.QUEUED and run.cancel_requested, "to see Cancelled"

        backend.create_run(_new("done"))
        backend.finish_run("done", 1, RunStatus.COMPLETED, output=b"j1")
        finished = backend.pause_run("done")
        assert finished is not None and finished.status is RunStatus.COMPLETED
        assert not finished.pause_requested


def check_resume_reopens_a_cancelled_run(make: MakeBackend) -> None:
    """resume_run(drop_from=) reopens a CANCELLED run: its steps from that position on
    are deleted, the events they consumed go back to the inbox, and it is queued with
    no outcome and no request. Without drop_from a cancelled run is left as it is."""
    with _opened(make) as backend:
        backend.create_run(_new("run-1"))
        backend.record(_step("run-1", 0), 1)
        backend.send_event("run-1", "go", b"j7")
        wait = _step("run-1", 1, kind=StepKind.EVENT, name="go", output=None)
        assert backend.consume_event(wait, 1, "go") is not None
        backend.record(_step("run-1", 2, kind=StepKind.CANCEL, name="durable.cancel"), 1)
        backend.record(_step("run-1", 3), 1)
        backend.finish_run("run-1", 1, RunStatus.CANCELLED, error=b"jcancelled")
        untouched = backend.resume_run("run-1")
        assert untouched is not None and untouched.status is RunStatus.CANCELLED
        reopened = backend.resume_run("run-1", drop_from=1)
        assert reopened is not None and reopened.status is RunStatus.QUEUED
        assert reopened.error is None and reopened.finished_at is None
        assert not reopened.cancel_requested
        assert [s.position for s in backend.load_history("run-1")] == [0]
        assert [e.consumed_position for e in backend.events("run-1")] == [None], (
            "the event consumed at a dropped position is in the inbox again"
        )


def check_any_event_inbox(make: MakeBackend) -> None:
    """A run waiting with ``waiting_on`` prefixed ``events|`` (a class with on_event) is
    woken by any event; consume_event(name=None) takes the oldest of any name but the
    excluded one, and the step takes its name; a parent waiting so on a child is woken
    when it finishes."""
    with _opened(make) as backend:
        backend.create_run(_new("run-1"))
        assert backend.has_events("run-1") is False
        status = backend.suspend_run("run-1", 1, wake_at=None, waiting_on="events|event:go")
        assert status is RunStatus.WAITING
        backend.send_event("run-1", "other", b"j1")
        assert _get(backend, "run-1").status is RunStatus.QUEUED, "any event wakes it"
        backend.send_event("run-1", "go", b"j2")
        assert backend.has_events("run-1") and backend.has_events("run-1", exclude="go")
        claimed = backend.claim_run("run-1", owner=OWNER, lease=30, epoch=1)
        assert claimed is not None
        handler = _step("run-1", 0, kind=StepKind.HANDLER, name="x", output=None)
        taken = backend.consume_event(handler, 2, None, exclude="other")
        assert taken is not None and taken[0].name == "go" and taken[0].output == b"j2"
        assert backend.has_events("run-1", exclude="other") is False
        taken = backend.consume_event(
            _step("run-1", 1, kind=StepKind.HANDLER, name="x", output=None), 2, None
        )
        assert taken is not None and taken[0].name == "other" and taken[0].output == b"j1"
        assert backend.has_events("run-1") is False
        backend.send_event("run-1", "late", b"j3")
        assert backend.suspend_run("run-1", 2, wake_at=None, waiting_on="events|") is (
            RunStatus.QUEUED
        ), "an unconsumed event ends the wait at once"

        backend.create_run(_new("parent"))
        backend.create_run(_child("parent/0", "parent", owner=OWNER))
        backend.suspend_run("parent", 1, wake_at=None, waiting_on="events|run:parent/0")
        backend.finish_run("parent/0", 1, RunStatus.COMPLETED, output=b"j1")
        assert _get(backend, "parent").status is RunStatus.QUEUED
