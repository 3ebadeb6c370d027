"""The Backend contract of forking a run (`ControlStore.fork_run`), as an executable
check (see `_conformance.py`): the new run and its copied steps in one write, the
original untouched, and the refusals that write nothing."""

from __future__ import annotations

import dataclasses

from durable.core.records import NewRun, RunStatus, StepKind, StepStatus

from ._conformance import OWNER, MakeBackend, _get, _new, _opened, _step


def _fork(new_id: str, origin: str, **fields: object) -> NewRun:
    values: dict[str, object] = {
        "id": new_id,
        "workflow": "app.workflow",
        "input": b'j{"args":[1],"kwargs":{}}',
        "call_hash": "v1:00",
        "owner": None,
        "lease": 30.0,
        "origin": origin,
    }
    values.update(fields)
    return NewRun(**values)  # type: ignore[arg-type]


def check_fork_run(make: MakeBackend) -> None:
    """fork_run creates the run QUEUED with its origin and copies the original's
    finished steps below the position, every column but the run id; unfinished steps,
    steps at or past the position, events and the original's outcome are not copied;
    the original is unchanged; a fork can be forked; an unknown original or a taken id
    writes nothing."""
    with _opened(make) as backend:
        backend.create_run(_new("orig"))
        state = b'j{"stage":1}'
        backend.record(_step("orig", 0, input=b"j[1]", state=state, details=b"j5"), 1)
        backend.record(_step("orig", 1, status=StepStatus.FAILED, output=None, error=b"jboom"), 1)
        waiting = _step(
            "orig", 2, kind=StepKind.SLEEP, status=StepStatus.WAITING, output=None, wake_at=9e9
        )
        backend.record(waiting, 1)
        backend.record(_step("orig", 3, kind=StepKind.DISPATCH, output=b'j"orig/3"'), 1)
        backend.record(_step("orig", 4, status=StepStatus.RUNNING, output=None), 1)
        backend.record(_step("orig", 5), 1)
        backend.send_event("orig", "go", b"j7")
        before_run, before_steps = _get(backend, "orig"), list(backend.load_history("orig"))

        forked = backend.fork_run("orig", _fork("f1", "orig", priority=3, queue="q"), before=5)
        assert forked is not None, "fork_run returns the created run"
        assert forked.status is RunStatus.QUEUED and forked.origin == "orig"
        assert forked.epoch == 0 and forked.lease_owner is None and forked.started_at is None
        assert forked.queue == "q" and forked.priority == 3
        assert forked.output is None and forked.error is None and forked.parent_id is None
        assert _get(backend, "f1") == forked, "the stored run is the one returned"
        copied = list(backend.load_history("f1"))
        assert [s.position for s in copied] == [0, 1, 3], (
            f"finished steps below 5 are copied, the waiting and running ones not: {copied}"
        )
        originals = {s.position: s for s in before_steps}
        for step in copied:
            same = dataclasses.replace(originals[step.position], run_id="f1")
            assert step == same, f"a copy is identical but for its run id: {step} != {same}"
        assert list(backend.events("f1")) == [], "events are not copied"
        assert _get(backend, "orig") == before_run, "the original run is unchanged"
        assert list(backend.load_history("orig")) == before_steps, "and so is its history"
        claimed = backend.claim_next(
            owner=OWNER, queue="q", workflows=["app.workflow"], limit=5, lease=30
        )
        assert [r.id for r in claimed] == ["f1"], "the fork is claimable in its queue"

        again = backend.fork_run("f1", _fork("f2", "f1"), before=2)
        assert again is not None and again.origin == "f1"
        assert [s.position for s in backend.load_history("f2")] == [0, 1], "a fork forks"
        assert backend.fork_run("orig", _fork("f3", "orig"), before=0) is not None
        assert list(backend.load_history("f3")) == [], "from 0, nothing is copied"

        assert backend.fork_run("orig", _fork("f2", "orig"), before=5) is None, "id taken"
        assert [s.position for s in backend.load_history("f2")] == [0, 1], "nothing written"
        assert _get(backend, "f2").origin == "f1"
        assert backend.fork_run("nobody", _fork("f4", "nobody"), before=1) is None
        assert backend.get_run("f4") is None, "no run without an original"
