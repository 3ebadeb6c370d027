"""The Backend contract of continue-as-new (`RunStore.continue_run`) and of events sent
down a chain (`WaitStore.send_event`), as executable checks (see `_conformance.py`)."""

from __future__ import annotations

import dataclasses

from durable.core.records import NewRun, RunStatus, StepStatus
from durable.errors import IdempotencyConflict, RunFinished

from ._conformance import OWNER, MakeBackend, _child, _get, _new, _opened, _step


def _successor(run_id: str, **fields: object) -> NewRun:
    values: dict[str, object] = {
        "id": run_id,
        "workflow": "app.workflow",
        "input": b'j{"args":[2],"kwargs":{}}',
        "call_hash": "v1:02",
        "owner": None,
        "lease": 0.0,
    }
    values.update(fields)
    return NewRun(**values)  # type: ignore[arg-type]


def check_continue_run_hands_over(make: MakeBackend) -> None:
    """continue_run, in one commit: records the last step and the properties, ends the
    run CONTINUED (finished, lease dropped), queues its successor with the options it
    was given, moves the unconsumed events (in order) and re-parents the unfinished
    children; consumed events and finished children stay."""
    with _opened(make) as backend:
        backend.create_run(_new("base"))
        start = _step("base", 0, status=StepStatus.RUNNING, output=None, finished_at=None)
        backend.record(start, 1)
        first = backend.send_event("base", "go", b"j1")
        backend.consume_event(_step("base", 9, status=StepStatus.WAITING), 1, "go")
        second = backend.send_event("base", "go", b"j2", key="k2")
        third = backend.send_event("base", "other", b"j3")
        backend.create_run(_child("base/1", "base", owner=None))
        backend.create_run(_child("base/2", "base", owner=OWNER))
        assert backend.finish_run("base/2", 1, RunStatus.COMPLETED, output=b"j0")
        successor = _successor(
            "base~1", queue="slow", priority=5, timeout=60.0, key="k", version="v7"
        )
        last = _step("base", 0)
        assert backend.continue_run("base", 1, successor, last_step=last, state=b'j{"n":1}')
        run = _get(backend, "base")
        assert run.status is RunStatus.CONTINUED and run.status.finished
        assert run.finished_at is not None and run.lease_owner is None
        assert run.state == b'j{"n":1}', "the properties snapshot is kept with the hand-over"
        history = list(backend.load_history("base"))
        assert history[0] == last, f"the last step, in the commit: {history[0]}"
        new = _get(backend, "base~1")
        assert new.status is RunStatus.QUEUED and new.epoch == 0 and new.parent_id is None
        assert (new.queue, new.priority, new.key, new.version) == ("slow", 5, "k", "v7")
        assert new.input == successor.input and new.call_hash == "v1:02"
        assert new.deadline_at is not None and abs(new.deadline_at - new.created_at - 60) < 1
        assert list(backend.load_history("base~1")) == []
        kept = [(e.id, e.consumed_position) for e in backend.events("base")]
        assert kept == [(first.id, 9)], f"a consumed event stays: {kept}"
        moved = [(e.id, e.name, e.payload) for e in backend.events("base~1")]
        assert moved == [(second.id, "go", b"j2"), (third.id, "other", b"j3")], moved
        assert _get(backend, "base/1").parent_id == "base~1", "an unfinished child moves"
        assert _get(backend, "base/2").parent_id == "base", "a finished child stays"
        claimed = backend.claim_next(
            owner=OWNER, queue="slow", workflows=["app.workflow"], limit=5, lease=30
        )
        assert [c.id for c in claimed] == ["base~1"], "the successor is claimable"


def check_continue_run_is_fenced_and_once(make: MakeBackend) -> None:
    """continue_run is fenced by the epoch and the run being unfinished and top-level:
    refused, it changes nothing (no successor, no step); a second hand-over of one run
    never makes a second successor; a successor id already taken is an
    IdempotencyConflict that changes nothing."""
    with _opened(make) as backend:
        backend.create_run(_new("base"))
        backend.send_event("base", "go", b"j1")
        last = _step("base", 0)
        assert not backend.continue_run("base", 7, _successor("base~1"), last_step=last)
        assert _get(backend, "base").status is RunStatus.RUNNING
        assert backend.get_run("base~1") is None, "a stale epoch creates no successor"
        assert list(backend.load_history("base")) == [], "nor records the step"
        assert [e.run_id for e in backend.events("base")] == ["base"]
        assert backend.continue_run("base", 1, _successor("base~1"))
        assert not backend.continue_run("base", 1, _successor("base~1"))
        assert not backend.continue_run("base", 1, _successor("base~1", input=b"j[]"))
        assert _get(backend, "base~1").input == _successor("base~1").input, "created once"
        backend.create_run(_child("kid", "base~1", owner=OWNER))
        assert not backend.continue_run("kid", 1, _successor("kid~1")), "a child is refused"
        assert _get(backend, "kid").status is RunStatus.RUNNING
        assert backend.get_run("kid~1") is None
        backend.create_run(_new("taken"))
        backend.create_run(dataclasses.replace(_new("taken~1"), owner=None))
        try:
            backend.continue_run("taken", 1, _successor("taken~1"), last_step=_step("taken", 0))
        except IdempotencyConflict:
            pass
        else:
            raise AssertionError("a successor id taken by another run must be refused")
        assert _get(backend, "taken").status is RunStatus.RUNNING, "nothing changed"
        assert list(backend.load_history("taken")) == []


def check_send_follows_the_chain(make: MakeBackend) -> None:
    """send_event to a CONTINUED run reaches the current run of its chain (the event
    names it); a key seen on the way is not delivered twice; a chain that ended gives
    RunFinished; a cancel request reaches the successor with the hand-over."""
    with _opened(make) as backend:
        backend.create_run(_new("base"))
        assert backend.continue_run("base", 1, _successor("base~1"))
        claimed = backend.claim_run("base~1", owner=OWNER, lease=30, epoch=0)
        assert claimed is not None and claimed.epoch == 1
        backend.suspend_run("base~1", 1, wake_at=None, waiting_on="event:go")
        event = backend.send_event("base", "go", b"j1", key="once")
        assert event.run_id == "base~1", f"the event went to {event.run_id!r}"
        assert _get(backend, "base~1").status is RunStatus.QUEUED, "and woke the waiting run"
        again = backend.send_event("base", "go", b"j9", key="once")
        assert again.id == event.id, "a key is delivered once along the chain"
        claimed = backend.claim_run("base~1", owner=OWNER, lease=30, epoch=1)
        assert claimed is not None
        assert backend.cancel_run("base~1") is not None
        assert backend.continue_run("base~1", 2, _successor("base~2"))
        assert _get(backend, "base~2").cancel_requested, "the cancel request goes along"
        assert [e.run_id for e in backend.events("base~2")] == ["base~2"], "moved again"
        later = backend.send_event("base", "late", b"j2")
        assert later.run_id == "base~2"
        backend.claim_run("base~2", owner=OWNER, lease=30, epoch=0)
        assert backend.finish_run("base~2", 1, RunStatus.CANCELLED)
        try:
            backend.send_event("base~1", "late", b"j3")
        except RunFinished as error:
            assert error.run_id == "base~2", f"RunFinished names the chain's end: {error}"
        else:
            raise AssertionError("a send to a chain that ended must raise RunFinished")
