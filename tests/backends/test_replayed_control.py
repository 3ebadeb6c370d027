"""What the state machine found about cancelling, pausing, parking and resuming runs
(and reopening a cancelled one), replayed on every backend."""

from __future__ import annotations

from collections.abc import Callable

from durable.core.records import RunStatus, StepStatus
from tests.backends._machine_backends import Backends
from tests.backends._machine_replay import _replay
from tests.backends._machine_strategies import OWNERS


def test_cancel_reaches_a_parent_waiting_on_its_queued_child(
    open_backends: Callable[[], Backends],
) -> None:
    """Cancelling a run that waits for its QUEUED child cancels the child and queues the
    parent with its cancel request (SQL used to wake it through the child first, and
    drop the request)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.suspend(run_id="r0", shift=0, timer=None, waiting="its child", other="r0"),
        lambda m: m.cancel(run_id="r0"),
    )
    for name, dump in dumps.items():
        parent, child = dump.runs["r0"], dump.runs["r1"]
        assert parent is not None and child is not None
        assert (parent.status, parent.cancel) == (RunStatus.QUEUED, True), name
        assert child.status is RunStatus.CANCELLED, name


def test_cancel_keeps_a_started_queued_run_queued_with_its_request(
    open_backends: Callable[[], Backends],
) -> None:
    """A run that has started and is queued again (here: its timer was woken) is not
    cancelled on the spot, twice over: it stays queued with the request, so its code
    sees Cancelled and its finally blocks run. A never-started sibling is cancelled."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.suspend(run_id="r0", shift=0, timer="past", waiting="nothing", other="r0"),
        lambda m: m.wake_due(limit=3),
        lambda m: m.cancel(run_id="r0"),
        lambda m: m.cancel(run_id="r0"),
    )
    for name, dump in dumps.items():
        parent, child = dump.runs["r0"], dump.runs["r1"]
        assert parent is not None and child is not None
        assert (parent.status, parent.cancel) == (RunStatus.QUEUED, True), name
        assert child.status is RunStatus.CANCELLED, name


def test_a_reopened_run_gets_back_the_events_of_the_positions_it_drops(
    open_backends: Callable[[], Backends],
) -> None:
    """resume_run(drop_from=) on a CANCELLED run: the steps from there on are deleted,
    the event one of them consumed is unconsumed again, and the run is queued with no
    outcome (a chain the machine seldom builds by chance: pinned here)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.send(run_id="r0", name="go", key=None, sender=None),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.consume(run_id="r0", shift=0, name=None, back=0, exclude="stop"),
        lambda m: m.finish(run_id="r0", shift=0, status=RunStatus.CANCELLED, with_step=True),
        lambda m: m.resume(run_id="r0", drop="an event"),
    )
    for name, dump in dumps.items():
        run, (event,) = dump.runs["r0"], dump.events["r0"]
        assert run is not None, name
        assert (run.status, run.error, run.cancel) == (RunStatus.QUEUED, None, False), name
        assert [s.position for s in dump.history["r0"]] == [0], name
        assert event.consumed_position is None, name


def test_pause_park_and_resume_a_tree(open_backends: Callable[[], Backends]) -> None:
    """pause_run over a tree: a running root is asked (its writes answer PAUSE_REQUEST,
    checked by the machine), a queued and a waiting child are PAUSED at once, the
    waiting one keeping its wait, which no event ends; park_run stops the root; and
    resume_run queues them all."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, OWNERS[1]), parent_of_r2="r0", queue="default", priority=0
        ),
        lambda m: m.suspend(
            run_id="r2", shift=0, timer="later", waiting="events|event:go", other="r2"
        ),
        lambda m: m.pause(run_id="r0"),
        lambda m: m.send(run_id="r2", name="stop", key=None, sender=None),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.park(run_id="r0", shift=0),
    )
    for name, dump in dumps.items():
        r0, r1, r2 = (dump.runs[r] for r in ("r0", "r1", "r2"))
        assert r0 is not None and r1 is not None and r2 is not None
        assert (r0.status, r0.pause, r0.owner) == (RunStatus.PAUSED, False, None), name
        assert r1.status is RunStatus.PAUSED, name
        assert (r2.status, r2.wake, r2.waiting_on) == (
            RunStatus.PAUSED, "later", "events|event:go",
        ), name  # fmt: skip
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, OWNERS[1]), parent_of_r2="r0", queue="default", priority=0
        ),
        lambda m: m.suspend(
            run_id="r2", shift=0, timer="later", waiting="events|event:go", other="r2"
        ),
        lambda m: m.pause(run_id="r0"),
        lambda m: m.park(run_id="r0", shift=0),
        lambda m: m.resume(run_id="r0", drop=None),
    )
    for name, dump in dumps.items():
        for run_id in ("r0", "r1", "r2"):
            run = dump.runs[run_id]
            assert run is not None and run.status is RunStatus.QUEUED, (name, run_id)
            assert (run.wake, run.waiting_on, run.pause) == (None, None, False), (name, run_id)
