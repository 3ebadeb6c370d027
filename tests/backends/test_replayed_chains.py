"""What the state machine found about chains and forks, replayed on every backend: a
refused hand-over records nothing, a chain carries events, children and requests, and
a fork copies the finished steps."""

from __future__ import annotations

from collections.abc import Callable

from durable.core.records import RunStatus, StepStatus
from tests.backends._machine_backends import Backends
from tests.backends._machine_replay import _replay
from tests.backends._machine_strategies import OWNERS, TAKEN
from tests.backends._model_records import FORK


def test_a_refused_hand_over_records_nothing(open_backends: Callable[[], Backends]) -> None:
    """continue_run of a child, with a last step: False, and the step is not recorded
    (SQL used to record it before it found the run refused); of a top-level run with a
    last step over a finished position: the hand-over is made, the position keeps its
    step (SQL used to refuse it)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2="r0", queue="default", priority=0
        ),
        lambda m: m.continue_run(run_id="r2", shift=0, back=0, version=None),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.continue_run(run_id="r0", shift=0, back=1, version=None),
    )
    for name, dump in dumps.items():
        r0, r2 = dump.runs["r0"], dump.runs["r2"]
        assert r2 is not None and r2.status is RunStatus.QUEUED, name
        assert dump.history["r2"] == () and dump.runs["r2~1"] is None, name
        assert r0 is not None and r0.status is RunStatus.CONTINUED, name
        assert [s.input for s in dump.history["r0"]] == [b"j[3]"], name  # record's, kept


def test_a_chain_carries_events_children_and_requests(
    open_backends: Callable[[], Backends],
) -> None:
    """r0 asked to pause hands over twice: its unconsumed event, its unfinished child
    and the request go to r0~1, then on to r0~2; an event sent to r0 follows the chain
    (its key, seen on the way, sends nothing twice). A successor id taken first is an
    IdempotencyConflict."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.send(run_id="r0", name="go", key=None, sender=None),
        lambda m: m.consume(run_id="r0", shift=0, name="go", back=0),
        lambda m: m.send(run_id="r0", name="stop", key="k1", sender=None),
        lambda m: m.pause(run_id="r0"),
        lambda m: m.continue_run(run_id="r0", shift=0, back=0, version="v1"),
        lambda m: m.continue_run(run_id="r0~1", shift=0, back=None, version=None),
        lambda m: m.send(run_id="r0", name="go", key="k2", sender="svc"),
        lambda m: m.send(run_id="r0", name="go", key="k1", sender="svc"),
        lambda m: m.create(
            run_id=TAKEN,
            owner=None,
            queue="default",
            priority=0,
            workflow="wf.a",
            same_call=True,
            parent=None,
        ),
        lambda m: m.continue_run(run_id="r2", shift=0, back=0, version=None),
    )
    for name, dump in dumps.items():
        r0, first, last, r1 = (dump.runs[i] for i in ("r0", "r0~1", "r0~2", "r1"))
        assert r0 is not None and first is not None and last is not None and r1 is not None
        assert (r0.status, first.status, first.version) == (
            RunStatus.CONTINUED, RunStatus.CONTINUED, "v1",
        ), name  # fmt: skip
        assert (last.status, last.pause, r1.parent) == (RunStatus.QUEUED, True, "r0~2"), name
        assert [e.consumed_position for e in dump.events["r0"]] == [0], name
        assert [(e.name, e.key) for e in dump.events["r0~2"]] == [
            ("stop", "k1"), ("go", "k2"),
        ], name  # fmt: skip
        r2 = dump.runs["r2"]
        assert r2 is not None and r2.status is RunStatus.QUEUED, name


def test_a_fork_copies_the_finished_steps(open_backends: Callable[[], Backends]) -> None:
    """fork_run copies the finished steps below *before*, skipping a RUNNING one (the
    fork's history has a gap), as a queued run with its origin and version; a second
    fork under the same id writes nothing."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.RUNNING),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.FAILED),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.fork(original="r0", new_id=FORK, fresh=False, back=1, version="v2"),
        lambda m: m.fork(original="r1", new_id=FORK, fresh=False, back=0, version=None),
    )
    for name, dump in dumps.items():
        fork = dump.runs[FORK]
        assert fork is not None, name
        assert (fork.status, fork.origin, fork.version) == (RunStatus.QUEUED, "r0", "v2"), name
        assert [s.position for s in dump.history[FORK]] == [0, 2], name
