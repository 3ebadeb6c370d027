"""The Backend contracts of waiting (`WaitStore`), as executable checks (see
`_conformance.py`).

Suspending, waking, the inbox, watches, and the races between them: a run deciding to
wait while an event arrives, or while the run it waits for finishes, must never end up
waiting for something that has already happened.
"""

from __future__ import annotations

import asyncio
import threading
import time

from durable.core.records import RunStatus, Step, StepKind, StepStatus
from durable.errors import LeaseLost, RunFinished, RunNotFound

from ._conformance import FAR, OWNER, MakeBackend, _child, _get, _new, _opened, _queued, _race

#: Rounds of each race in check_no_lost_wake_ups.
ROUNDS = 40


def _event_step(run_id: str, position: int, name: str = "go") -> Step:
    return Step(
        run_id=run_id,
        position=position,
        kind=StepKind.EVENT,
        name=name,
        call_hash="v1:ev",
        status=StepStatus.COMPLETED,
        started_at=1.0,
        finished_at=2.0,
        epoch=1,
    )


def check_suspend_and_wake_due(make: MakeBackend) -> None:
    """suspend_run parks a run until its time; wake_due queues exactly the due ones."""
    with _opened(make) as backend:
        for run_id in ("later", "soon", "past"):
            backend.create_run(_new(run_id))
        now = backend.now()
        assert backend.next_wake() is None, "no sleeping run: no wake-up time"
        status = backend.suspend_run("later", 1, wake_at=now + FAR, waiting_on=None)
        assert status is RunStatus.WAITING
        later = _get(backend, "later")
        assert later.lease_owner is None and later.wake_at == now + FAR
        assert backend.suspend_run("soon", 1, wake_at=now + 0.3, waiting_on=None) is (
            RunStatus.WAITING
        )
        assert backend.suspend_run("past", 1, wake_at=now - 1, waiting_on=None) is (
            RunStatus.QUEUED
        ), "a wait already over queues the run at once"
        assert backend.suspend_run("later", 1, wake_at=now, waiting_on=None) is None, (
            "suspend_run is fenced: a run that is not RUNNING at that epoch is not changed"
        )
        due_in = backend.next_wake()
        assert due_in is not None and 0 < due_in <= 0.3, f"the earliest timer: got {due_in}"
        assert backend.wake_due(limit=10) == 0, "a wake-up never fires early"
        assert backend.claim_run("soon", owner=OWNER, lease=30, epoch=1) is None, (
            "a sleeping run cannot be claimed before it is due"
        )
        time.sleep(0.4)
        assert backend.wake_due(limit=10) == 1
        soon = _get(backend, "soon")
        assert soon.status is RunStatus.QUEUED and soon.wake_at is None
        assert _get(backend, "later").status is RunStatus.WAITING
        claimed = backend.claim_run("soon", owner=OWNER, lease=30, epoch=1)
        assert claimed is not None and claimed.epoch == 2 and claimed.recoveries == 0


def check_due_run_is_claimable_and_recoverable(make: MakeBackend) -> None:
    """A WAITING run past its wake_at can be claimed directly; once woken, it is listed
    as recoverable (a run that started before and is queued again)."""
    with _opened(make) as backend:
        for run_id in ("nap", "doze"):
            backend.create_run(_new(run_id))
            backend.suspend_run(run_id, 1, wake_at=backend.now() + 0.2, waiting_on="event:x")
        time.sleep(0.3)
        claimed = backend.claim_run("nap", owner=OWNER, lease=30, epoch=1)
        assert claimed is not None and claimed.status is RunStatus.RUNNING
        assert claimed.wake_at is None and claimed.waiting_on is None
        assert "doze" not in {r.id for r in backend.recoverable(host="elsewhere")}
        assert backend.wake_due(limit=10) == 1
        assert "doze" in {r.id for r in backend.recoverable(host="elsewhere")}


def check_send_and_consume(make: MakeBackend) -> None:
    """Events are kept until consumed, oldest first, each by exactly one wait."""
    with _opened(make) as backend:
        backend.create_run(_new("run-1"))
        first = backend.send_event("run-1", "go", b"j1", sender="test")
        second = backend.send_event("run-1", "go", b"j2")
        backend.send_event("run-1", "other", b"j3")
        assert second.id > first.id and first.sender == "test"
        stored, _ = backend.consume_event(_event_step("run-1", 0), 1, "go") or (None, None)
        assert stored is not None and stored.output == b"j1", "the oldest event first"
        assert stored.status is StepStatus.COMPLETED
        assert stored.input == b'j{"event":%d}' % first.id
        again = backend.consume_event(_event_step("run-1", 0), 1, "go")
        assert again is not None and again[0].output == b"j1", (
            "a position already recorded keeps its event; no second event is taken"
        )
        taken = backend.consume_event(_event_step("run-1", 1), 1, "go")
        assert taken is not None and taken[0].output == b"j2"
        assert backend.consume_event(_event_step("run-1", 2), 1, "go") is None
        events = backend.events("run-1")
        assert [(e.name, e.consumed_position) for e in events] == [
            ("go", 0),
            ("go", 1),
            ("other", None),
        ]
        assert [s.position for s in backend.load_history("run-1")] == [0, 1]
        try:
            backend.consume_event(_event_step("run-1", 2, "other"), 7, "other")
        except LeaseLost:
            pass
        else:
            raise AssertionError("consume_event must be fenced by the epoch")
        assert backend.events("run-1")[2].consumed_position is None, "fenced: nothing taken"


def check_send_errors_and_keys(make: MakeBackend) -> None:
    """send_event refuses unknown and finished runs, and delivers a key once."""
    with _opened(make) as backend:
        try:
            backend.send_event("nobody", "go", b"j1")
        except RunNotFound:
            pass
        else:
            raise AssertionError("sending to an unknown run must raise RunNotFound")
        backend.create_run(_new("run-1"))
        once = backend.send_event("run-1", "go", b"j1", key="delivery-7")
        twice = backend.send_event("run-1", "go", b"j2", key="delivery-7")
        assert twice.id == once.id and twice.payload == b"j1", "the earlier event is returned"
        assert len(backend.events("run-1")) == 1
        backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j0")
        try:
            backend.send_event("run-1", "go", b"j3")
        except RunFinished as error:
            assert error.status == "completed"
        else:
            raise AssertionError("sending to a finished run must raise RunFinished")


def check_events_wake_waiting_runs(make: MakeBackend) -> None:
    """A run waiting for an event is queued when it is sent (or was sent before)."""
    with _opened(make) as backend:
        backend.create_run(_new("run-1"))
        assert backend.suspend_run("run-1", 1, wake_at=None, waiting_on="event:go") is (
            RunStatus.WAITING
        )
        watch = backend.watch(["run:run-1"])
        backend.send_event("run-1", "other", b"j1")
        assert _get(backend, "run-1").status is RunStatus.WAITING, "only the awaited name wakes"
        backend.send_event("run-1", "go", b"j2")
        assert _get(backend, "run-1").status is RunStatus.QUEUED
        assert watch.wait(2), "waking a run notifies run:<id>"
        backend.create_run(_new("run-2"))
        backend.send_event("run-2", "go", b"j3")
        assert backend.suspend_run("run-2", 1, wake_at=None, waiting_on="event:go") is (
            RunStatus.QUEUED
        ), "an event already in the inbox ends the wait at once"


def check_finishing_child_wakes_parent(make: MakeBackend) -> None:
    """A parent waiting on run:<child> is queued when the child finishes or is cancelled."""
    with _opened(make) as backend:
        backend.create_run(_new("parent"))
        backend.create_run(_child("parent/0", "parent", owner=OWNER))
        backend.create_run(_child("parent/1", "parent", owner=None))
        assert backend.suspend_run("parent", 1, wake_at=None, waiting_on="run:parent/0") is (
            RunStatus.WAITING
        )
        backend.finish_run("parent/1", 0, RunStatus.CANCELLED)
        assert _get(backend, "parent").status is RunStatus.WAITING, "another child: no wake"
        backend.finish_run("parent/0", 1, RunStatus.COMPLETED, output=b"j1")
        assert _get(backend, "parent").status is RunStatus.QUEUED
        claimed = backend.claim_run("parent", owner=OWNER, lease=30, epoch=1)
        assert claimed is not None
        assert backend.suspend_run("parent", 2, wake_at=None, waiting_on="run:parent/0") is (
            RunStatus.QUEUED
        ), "waiting on a run that has finished ends at once"
        # Cancelling a queued child wakes its waiting parent too.
        claimed = backend.claim_run("parent", owner=OWNER, lease=30, epoch=2)
        assert claimed is not None
        backend.create_run(_child("parent/2", "parent", owner=None))
        backend.suspend_run("parent", 3, wake_at=None, waiting_on="run:parent/2")
        backend.cancel_run("parent/2")
        assert _get(backend, "parent/2").status is RunStatus.CANCELLED
        assert _get(backend, "parent").status is RunStatus.QUEUED


def check_cancel_waiting_run(make: MakeBackend) -> None:
    """cancel_run queues a WAITING run with cancel_requested, to receive Cancelled."""
    with _opened(make) as backend:
        backend.create_run(_new("run-1"))
        backend.suspend_run("run-1", 1, wake_at=backend.now() + FAR, waiting_on="event:go")
        run = backend.cancel_run("run-1")
        assert run is not None and run.status is RunStatus.QUEUED and run.cancel_requested
        assert run.wake_at is None and run.waiting_on is None
        assert backend.next_wake() is None


def check_no_lost_wake_ups(make: MakeBackend) -> None:
    """A run suspending while its event is sent, or while its child finishes, is never
    left waiting for what already happened (lock, then check)."""
    with _opened(make) as backend:
        for i in range(ROUNDS):
            run_id, child = f"r{i}", f"r{i}/0"
            backend.create_run(_new(run_id))
            backend.create_run(_child(child, run_id, owner=OWNER))

            def event_race(who: int, run_id: str = run_id) -> object:
                if who == 0:
                    return backend.suspend_run(run_id, 1, wake_at=None, waiting_on="event:go")
                return backend.send_event(run_id, "go", b"j1")

            _race(2, event_race)
            assert _get(backend, run_id).status is RunStatus.QUEUED, (
                f"round {i}: the event arrived, yet the run still waits for it"
            )
            claimed = backend.claim_run(run_id, owner=OWNER, lease=30, epoch=1)
            assert claimed is not None

            def child_race(who: int, run_id: str = run_id, child: str = child) -> object:
                if who == 0:
                    return backend.suspend_run(run_id, 2, wake_at=None, waiting_on=f"run:{child}")
                return backend.finish_run(child, 1, RunStatus.COMPLETED, output=b"j1")

            _race(2, child_race)
            assert _get(backend, run_id).status is RunStatus.QUEUED, (
                f"round {i}: the child finished, yet its parent still waits for it"
            )


def check_wake_due_race(make: MakeBackend) -> None:
    """Concurrent wake_due calls wake each due run exactly once."""
    with _opened(make) as backend:
        for i in range(40):
            backend.create_run(_new(f"r{i}"))
            backend.suspend_run(f"r{i}", 1, wake_at=backend.now() + 0.1, waiting_on=None)
        time.sleep(0.2)
        woken = _race(4, lambda _: backend.wake_due(limit=7))
        woken += _race(4, lambda _: backend.wake_due(limit=100))
        assert sum(woken) == 40, f"40 runs were due; wake_due calls woke {woken}"


def check_watch_wakes_waiters(make: MakeBackend) -> None:
    """A watch on run:<id> returns early when that run finishes, and queue:<name> on work;
    `Watch.poke` ends a wait from another thread."""
    with _opened(make) as backend:
        backend.create_run(_new())
        watch = backend.watch(["run:run-1"])
        finisher = threading.Timer(
            0.05, lambda: backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j1")
        )
        finisher.start()
        started = time.monotonic()
        watch.wait(5)
        assert time.monotonic() - started < 2, "finishing the run must wake its watchers"
        queue_watch = backend.watch(["queue:emails"])
        backend.create_run(_queued("mail", queue="emails"))
        started = time.monotonic()
        assert queue_watch.wait(5), "a change made before the wait is not lost"
        assert time.monotonic() - started < 0.5
        # poke: its owner's own news ends the wait (a backend that polls may end it
        # sooner, saying nothing changed)
        poker = threading.Timer(0.05, queue_watch.poke)
        poker.start()
        deadline = time.monotonic() + 2
        while not queue_watch.wait(5):
            assert time.monotonic() < deadline, "a poke ends the wait"
        poker.join(5)
        # A watch may wake early (SQLite's poll): the finish must not outlive the backend.
        finisher.join(5)
        # wait_async: the same, awaited on a loop; a change made from a thread wakes it.
        backend.create_run(_new("run-2"))
        awaited = backend.watch(["run:run-2"])
        finished = threading.Timer(
            0.05, lambda: backend.finish_run("run-2", 1, RunStatus.COMPLETED, output=b"j2")
        )
        finished.start()
        started = time.monotonic()
        ends = started + 2
        while not asyncio.run(awaited.wait_async(5)):  # a polling backend may wake early
            assert time.monotonic() < ends, "finishing the run must wake an awaited wait"
        assert time.monotonic() - started < 2
        finished.join(5)


def check_suspend_decides_once(make: MakeBackend) -> None:
    """A wait ending about now is decided once: QUEUED with no wake time, or WAITING
    with one; never WAITING on nothing (such a run would sleep forever). PostgreSQL's
    clock moves between the expressions of one statement, so the decision reads the
    statement's clock once."""
    with _opened(make) as backend:
        for i in range(600):
            run_id = f"edge-{i}"
            backend.create_run(_new(run_id))
            wake_at = backend.now() + (i % 120) * 1e-5  # 0 to 1.2 ms ahead
            status = backend.suspend_run(run_id, 1, wake_at=wake_at, waiting_on=None)
            run = backend.get_run(run_id)
            assert run is not None and run.status is status
            assert (status is RunStatus.QUEUED) == (run.wake_at is None), (
                f"suspend_run left {run_id} {status} with wake_at={run.wake_at}"
            )
