"""The Backend contracts of histories (`HistoryStore`), as executable checks (see
`_conformance.py`): steps load back as recorded, the first finished write of a
position wins, and only the run's current owner may write."""

from __future__ import annotations

import contextlib
import dataclasses
import time

from durable.core.records import RunStatus, StepStatus
from durable.errors import LeaseLost

from ._conformance import OTHER, SHORT_LEASE, MakeBackend, _expire, _new, _opened, _step


def check_history_round_trip(make: MakeBackend) -> None:
    """Recorded steps load back in position order, bytes intact, separate per run."""
    with _opened(make) as backend:
        backend.create_run(_new("a"))
        backend.create_run(_new("b"))
        blob = bytes(range(256)) * 4096  # 1 MiB with every byte value, NULs included
        for position in (2, 0, 1):
            backend.record(_step("a", position), 1)
        backend.record(_step("a", 3, output=blob, input=b"j[1]"), 1)
        backend.record(_step("b", 0, output=b"jb"), 1)
        history = list(backend.load_history("a"))
        assert [s.position for s in history] == [0, 1, 2, 3]
        assert history[3].output == blob and history[3].input == b"j[1]"
        assert history[0] == _step("a", 0), f"a step must load back as stored: {history[0]}"
        assert [s.output for s in backend.load_history("b")] == [b"jb"]
        assert list(backend.load_history("missing")) == []


def check_record_first_writer_wins(make: MakeBackend) -> None:
    """A finished step is never changed; recording over it returns the stored one."""
    with _opened(make) as backend:
        backend.create_run(_new())
        first, _ = backend.record(_step("run-1", 0, output=b"jfirst"), 1)
        assert first.output == b"jfirst"
        second, _ = backend.record(_step("run-1", 0, output=b"jsecond"), 1)
        assert second.output == b"jfirst", "a finished position must keep its first outcome"
        failed, _ = backend.record(_step("run-1", 0, status=StepStatus.FAILED, error=b"jx"), 1)
        assert failed.status is StepStatus.COMPLETED
        assert [s.output for s in backend.load_history("run-1")] == [b"jfirst"]


def check_record_retrying_then_finished(make: MakeBackend) -> None:
    """A RETRYING step may be replaced by later attempts and by the final outcome."""
    with _opened(make) as backend:
        backend.create_run(_new())
        backend.record(_step("run-1", 0, status=StepStatus.RETRYING, error=b"je1", attempts=1), 1)
        backend.record(_step("run-1", 0, status=StepStatus.RETRYING, error=b"je2", attempts=2), 1)
        (step,) = backend.load_history("run-1")
        assert step.status is StepStatus.RETRYING and step.attempts == 2 and step.error == b"je2"
        backend.record(_step("run-1", 0, output=b"jok", attempts=3), 1)
        (step,) = backend.load_history("run-1")
        assert step.status is StepStatus.COMPLETED and step.attempts == 3
        assert step.output == b"jok"


def check_record_is_fenced(make: MakeBackend) -> None:
    """record with a stale epoch, or for an unknown run, raises LeaseLost and writes nothing."""
    with _opened(make) as backend:
        backend.create_run(_new())
        for run_id, epoch in (("run-1", 2), ("run-1", 0), ("unknown", 1)):
            try:
                backend.record(_step(run_id, 0), epoch)
            except LeaseLost as error:
                assert error.run_id == run_id and error.epoch == epoch
            else:
                raise AssertionError(f"record({run_id!r}, epoch={epoch}) must raise LeaseLost")
        assert list(backend.load_history("run-1")) == []


def check_claim_fences_old_owner(make: MakeBackend) -> None:
    """After another owner claims a run, the old owner can no longer record or finish."""
    with _opened(make) as backend:
        backend.create_run(_new(lease=SHORT_LEASE))
        backend.record(_step("run-1", 0), 1)
        _expire()
        claimed = backend.claim_run("run-1", owner=OTHER, lease=30, epoch=1)
        assert claimed is not None and claimed.epoch == 2
        try:
            backend.record(_step("run-1", 1), 1)
        except LeaseLost:
            pass
        else:
            raise AssertionError("the previous owner's record must be fenced off")
        assert not backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j1")
        assert backend.record(_step("run-1", 1, epoch=2), 2)[0].epoch == 2
        assert [s.epoch for s in backend.load_history("run-1")] == [1, 2]


def check_record_steps_is_one_write(make: MakeBackend) -> None:
    """record_steps stores a task's result and the next task's start together, each as
    record would; fenced as one (a stale epoch writes neither); it reports a cancel
    request, as record does."""
    with _opened(make) as backend:
        backend.create_run(_new())
        result = _step("run-1", 0)
        start = _step("run-1", 1, status=StepStatus.RUNNING, output=None, finished_at=None)
        stored, cancel = backend.record_steps([result, start], 1)
        assert stored == [result, start] and not cancel
        assert list(backend.load_history("run-1")) == [result, start]
        with contextlib.suppress(LeaseLost):
            backend.record_steps([_step("run-1", 1), _step("run-1", 2)], 7)
            raise AssertionError("record_steps at a stale epoch must raise LeaseLost")
        assert list(backend.load_history("run-1")) == [result, start], "nothing written"
        backend.cancel_run("run-1")
        stored, cancel = backend.record_steps([_step("run-1", 1), _step("run-1", 2)], 1)
        assert cancel and [s.position for s in stored] == [1, 2]
        assert [s.status for s in backend.load_history("run-1")] == [StepStatus.COMPLETED] * 3


def check_finish_run_records_the_last_step(make: MakeBackend) -> None:
    """finish_run(last_step=) records the last task's result with the run's outcome, in
    one commit: over its RUNNING start, fenced as one (a stale epoch writes neither)."""
    with _opened(make) as backend:
        backend.create_run(_new())
        start = _step("run-1", 0, status=StepStatus.RUNNING, output=None, finished_at=None)
        backend.record(start, 1)
        assert not backend.finish_run("run-1", 7, RunStatus.COMPLETED, last_step=_step("run-1", 0))
        assert list(backend.load_history("run-1")) == [start], "a stale epoch writes nothing"
        result = _step("run-1", 0)
        assert backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j0", last_step=result)
        assert list(backend.load_history("run-1")) == [result]
        run = backend.get_run("run-1")
        assert run is not None and run.status is RunStatus.COMPLETED and run.output == b"j0"
        late = _step("run-1", 1)
        assert not backend.finish_run("run-1", 1, RunStatus.FAILED, last_step=late)
        assert list(backend.load_history("run-1")) == [result], "a finished run records nothing"


def check_hung_attempt_makes_its_run_claimable(make: MakeBackend) -> None:
    """A RUNNING step whose ``wake_at`` (its heartbeat deadline) has passed makes its run
    recoverable and claimable though its lease is live; a heartbeat with a gap moves
    that deadline; the claim fences the hung owner's heartbeats. A RUNNING step without
    ``wake_at`` never does."""
    with _opened(make) as backend:
        backend.create_run(_new())
        backend.create_run(_new("quiet"))
        now = backend.now()
        start = _step("run-1", 0, status=StepStatus.RUNNING, output=None, finished_at=None)
        backend.record(dataclasses.replace(start, wake_at=now + 0.3), 1)
        backend.record(dataclasses.replace(start, run_id="quiet", started_at=now - 100), 1)
        assert backend.heartbeat("run-1", 0, 1, 1, None, gap=0.6) is False
        (beating,) = backend.load_history("run-1")
        assert beating.wake_at is not None and beating.wake_at >= now + 0.5, (
            "a heartbeat with a gap must move the step's wake_at to now + gap"
        )
        time.sleep(0.4)  # past the first deadline, not the one the heartbeat set
        ids = {run.id for run in backend.recoverable(host="elsewhere")}
        assert "run-1" not in ids and "quiet" not in ids, "alive: nothing to recover"
        assert backend.claim_run("run-1", owner=OTHER, lease=30, epoch=1) is None
        time.sleep(0.4)  # past the deadline the heartbeat set
        ids = {run.id for run in backend.recoverable(host="elsewhere")}
        assert ids == {"run-1"}, f"only the hung run is recoverable, got {ids}"
        assert backend.claim_run("quiet", owner=OTHER, lease=30, epoch=1) is None
        claimed = backend.claim_run("run-1", owner=OTHER, lease=30, epoch=1)
        assert claimed is not None and claimed.epoch == 2 and claimed.lease_owner == OTHER
        with contextlib.suppress(LeaseLost):
            backend.heartbeat("run-1", 0, 1, 1, None, gap=0.6)
            raise AssertionError("the hung owner's heartbeat must be fenced after the claim")


def check_heartbeat_is_fenced_and_reports_cancel(make: MakeBackend) -> None:
    """heartbeat() stamps a RUNNING attempt and keeps its details (a later record keeps
    them too, for the next attempt); a stale epoch, another attempt or a finished step
    is LeaseLost; a cancel request comes back as True, nothing written."""
    with _opened(make) as backend:
        backend.create_run(_new())
        start = _step("run-1", 0, status=StepStatus.RUNNING, output=None, finished_at=None)
        backend.record(start, 1)
        assert backend.heartbeat("run-1", 0, 1, 1, b'j{"done":3}') is False
        (beating,) = backend.load_history("run-1")
        assert beating.heartbeat_at is not None and beating.details == b'j{"done":3}'
        assert backend.heartbeat("run-1", 0, 1, 1, None) is False
        assert backend.load_history("run-1")[0].details == b'j{"done":3}', "None keeps them"
        for epoch, attempt, position in ((7, 1, 0), (1, 2, 0), (1, 1, 5)):
            with contextlib.suppress(LeaseLost):
                backend.heartbeat("run-1", position, epoch, attempt, b"jnull")
                raise AssertionError(f"heartbeat({position}, {epoch}, {attempt}) is fenced")
        retrying = _step("run-1", 0, status=StepStatus.RETRYING, output=None, error=b"jx")
        backend.record(retrying, 1)
        assert backend.load_history("run-1")[0].details == b'j{"done":3}', "kept for attempt 2"
        backend.record(dataclasses.replace(start, attempts=2), 1)
        (second,) = backend.load_history("run-1")
        assert second.heartbeat_at is None and second.details == b'j{"done":3}'
        backend.cancel_run("run-1")
        assert backend.heartbeat("run-1", 0, 1, 2, b"jnull") is True
        assert backend.load_history("run-1")[0].details == b'j{"done":3}', "nothing written"
        backend.record(_step("run-1", 0), 1)
        with contextlib.suppress(LeaseLost):
            backend.heartbeat("run-1", 0, 1, 2, None)
            raise AssertionError("a finished step takes no heartbeat")


def check_state_snapshots(make: MakeBackend) -> None:
    """A step's properties snapshot loads back; a later write at its position without
    one keeps it, one with a snapshot replaces it; `state` reads the run's own snapshot
    (finish_run(state=)) first, else the furthest step's, and None for no run."""
    with _opened(make) as backend:
        backend.create_run(_new())
        assert backend.state("run-1") == (None,), "a run that published nothing"
        assert backend.state("missing") is None
        start = _step("run-1", 0, status=StepStatus.RUNNING, output=None, finished_at=None)
        backend.record(dataclasses.replace(start, state=b'j{"a":1}'), 1)
        backend.record_steps(
            [_step("run-1", 0), dataclasses.replace(_step("run-1", 1), state=b'j{"a":2}')], 1
        )
        first, second = backend.load_history("run-1")
        assert first.state == b'j{"a":1}', "the result over a start keeps the start's snapshot"
        assert second.state == b'j{"a":2}'
        backend.record(_step("run-1", 2), 1)
        assert backend.state("run-1") == (b'j{"a":2}',), "the furthest step that has one"
        backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j0", state=b'j{"a":3}')
        run = backend.get_run("run-1")
        assert run is not None and run.state == b'j{"a":3}'
        assert backend.state("run-1") == (b'j{"a":3}',), "the run's own snapshot first"
        backend.create_run(_new("run-2"))
        backend.record(_step("run-2", 0, state=b'j{"b":1}'), 1)
        backend.finish_run("run-2", 1, RunStatus.FAILED, error=b"je")
        assert backend.state("run-2") == (b'j{"b":1}',), "an end without one keeps the steps'"
