"""What the state machine found about a run's history, events and waits, replayed on
every backend: a position written over keeps its first start, a pair over a finished
position is recorded step by step, and ``events|`` waits end on any event."""

from __future__ import annotations

from collections.abc import Callable

from durable.core.records import RunStatus, StepStatus
from tests.backends._machine_backends import Backends
from tests.backends._machine_replay import _replay
from tests.backends._machine_strategies import OWNERS


def test_recording_over_a_retrying_step_keeps_its_first_start(
    open_backends: Callable[[], Backends],
) -> None:
    """A position written over (it was RETRYING) keeps the started_at of its first write
    on every backend (the memory backend used to take the new one)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.record(run_id="r1", shift=0, back=0, status=StepStatus.RETRYING),
        lambda m: m.record(run_id="r1", shift=0, back=1, status=StepStatus.COMPLETED),
    )
    for name, dump in dumps.items():
        (step,) = dump.history["r1"]
        assert (step.status, step.attempts, step.started_at) == (StepStatus.COMPLETED, 2, 1.0), name


def test_a_pair_over_a_finished_position_is_recorded_step_by_step(
    open_backends: Callable[[], Backends],
) -> None:
    """record_steps where the start's position is already finished: nothing of the pair
    is written in one go; each step is then recorded alone, and the answers are what
    `record` gives (SQL used to write the result first and read it back as found)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2="r0", queue="default", priority=0
        ),
        lambda m: m.record(run_id="r2", shift=0, back=0, status=StepStatus.RETRYING),
        lambda m: m.record(run_id="r2", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.record_pair(run_id="r2", shift=0, back=2),
    )
    for name, dump in dumps.items():
        first, second = dump.history["r2"]
        assert (first.status, first.input, first.started_at) == (
            StepStatus.COMPLETED, b"j[3]", 1.0,
        ), name  # fmt: skip
        assert (second.status, second.input) == (StepStatus.COMPLETED, b"j[2]"), name


def test_any_event_waits_end_on_any_event_and_on_the_child(
    open_backends: Callable[[], Backends],
) -> None:
    """A run waiting ``events|event:go`` is queued by an event of another name; one
    waiting ``events|run:<child>`` by its child finishing."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, OWNERS[1]), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.suspend(
            run_id="r2", shift=0, timer=None, waiting="events|event:go", other="r2"
        ),
        lambda m: m.send(run_id="r2", name="stop", key=None, sender=None),
        lambda m: m.suspend(
            run_id="r0", shift=0, timer="later", waiting="events|its child", other="r0"
        ),
        lambda m: m.finish(run_id="r1", shift=0, status=RunStatus.COMPLETED, with_step=False),
        lambda m: m.has_events(run_id="r2", exclude="stop"),
        lambda m: m.has_events(run_id="r2", exclude=None),
    )
    for name, dump in dumps.items():
        r0, r2 = dump.runs["r0"], dump.runs["r2"]
        assert r0 is not None and r2 is not None
        assert (r0.status, r2.status) == (RunStatus.QUEUED, RunStatus.QUEUED), name
