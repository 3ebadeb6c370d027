"""The invariants between two consecutive observed states (`check_transition`):
positions without gaps, what a run of each status looks like, epochs never going down,
finished runs and steps never changing, a cancelled run reopened only as a prefix of
itself, and each event consumed once, in order, by the step that records it."""

from __future__ import annotations

import dataclasses

from durable.core.events import Event
from durable.core.records import RunStatus, Step, StepStatus
from tests.backends._model_records import OBSERVED, Dump, RunView


def check_transition(before: Dump | None, after: Dump) -> None:
    """The invariants of one state, and of the step from *before* to *after*."""
    for run_id in OBSERVED:
        run = after.runs[run_id]
        steps, inbox = after.history[run_id], after.events[run_id]
        if run is None:
            assert not steps and not inbox, f"{run_id}: history or events without a run"
            continue
        positions = [step.position for step in steps]
        # A fork copies only the finished steps: it may skip the positions of others.
        gapless = positions == list(range(len(steps)))
        assert gapless or run.origin is not None, f"{run_id}: positions {positions} have gaps"
        assert positions == sorted(set(positions)), f"{run_id}: positions {positions}"
        _check_run(run_id, run)
        _check_inbox(run_id, steps, inbox)
        if before is None:
            continue
        was = before.runs[run_id]
        if was is None:
            continue
        assert run.epoch >= was.epoch, f"{run_id}: epoch went back from {was.epoch} to {run.epoch}"
        earlier_steps, earlier = before.history[run_id], before.events[run_id]
        reopened = was.status is RunStatus.CANCELLED and not run.status.finished
        if reopened:
            _check_reopened(run_id, was, run, earlier_steps, steps)
        elif was.status.finished:
            assert (run.status, run.output, run.error) == (was.status, was.output, was.error), (
                f"{run_id}: a finished run changed: {was} -> {run}"
            )
        at = {step.position: step for step in steps}
        end = max(at, default=-1) + 1
        for done in earlier_steps:
            if done.status.finished and (done.position < end or not reopened):
                assert at.get(done.position) == done, (
                    f"{run_id}: finished step {done.position} changed: {done} -> "
                    f"{at.get(done.position)}"
                )
        if run.status is RunStatus.CONTINUED and was.status is not RunStatus.CONTINUED:
            # Handed over: its unconsumed events moved to its successor.
            kept = tuple(e for e in earlier if e.consumed_position is not None)
            assert inbox == kept, f"{run_id}: continued, its inbox {earlier} became {inbox}"
            continue
        assert len(inbox) >= len(earlier), f"{run_id}: events were lost"
        for sent, now in zip(earlier, inbox, strict=False):
            # Only consumed_position may change, and only once, from None; unless the
            # run was reopened, which gives back the events of the positions it dropped.
            taken_at = sent.consumed_position
            if reopened and taken_at is not None and taken_at >= end:
                assert now == dataclasses.replace(sent, consumed_position=None), (
                    f"{run_id}: event {sent} of a dropped position is now {now}"
                )
                continue
            settled = taken_at is not None
            same = (now if settled else dataclasses.replace(now, consumed_position=None)) == sent
            assert same, f"{run_id}: event {sent} changed to {now}"


def _check_run(run_id: str, run: RunView) -> None:
    """What a run of each status looks like."""
    running = run.status is RunStatus.RUNNING
    assert (run.owner is not None and run.lease is not None) == running, (
        f"{run_id}: a run has an owner and a lease exactly when RUNNING: {run}"
    )
    assert run.finished == run.status.finished, f"{run_id}: finished_at vs status: {run}"
    assert run.started == (run.epoch > 0), f"{run_id}: started vs epoch: {run}"
    assert not (run.cancel and run.pause), f"{run_id}: a cancel request clears a pause: {run}"
    if run.status is RunStatus.WAITING:
        assert run.wake is not None or run.waiting_on is not None, (
            f"{run_id}: WAITING on nothing: {run}"
        )
    if run.status in (RunStatus.QUEUED, RunStatus.RUNNING):
        assert run.wake is None and run.waiting_on is None, (
            f"{run_id}: a {run.status} run keeps a wait: {run}"
        )
    if run.status is RunStatus.PAUSED:
        # A run asked to cancel is never paused; a paused one keeps what it waited for.
        assert not run.cancel, f"{run_id}: PAUSED with a cancel request: {run}"


def _check_reopened(
    run_id: str, was: RunView, run: RunView, earlier: tuple[Step, ...], steps: tuple[Step, ...]
) -> None:
    """A CANCELLED run reopened (`resume_run(drop_from=)`): queued with no outcome and
    no request, its history cut after a prefix of what it was."""
    fresh = dataclasses.replace(
        was,
        status=RunStatus.QUEUED,
        output=None,
        error=None,
        finished=False,
        recoveries=0,
        cancel=False,
        pause=False,
        wake=None,
        waiting_on=None,
        state=None,
    )
    assert run == fresh, f"{run_id}: a cancelled run reopened as {run}, from {was}"
    assert steps == earlier[: len(steps)], f"{run_id}: reopened, its history is no prefix"


def _check_inbox(run_id: str, steps: tuple[Step, ...], inbox: tuple[Event, ...]) -> None:
    """Each event is consumed by one position, which records it; FIFO per name."""
    positions = [e.consumed_position for e in inbox if e.consumed_position is not None]
    assert len(positions) == len(set(positions)), f"{run_id}: a position took two events"
    for name in {e.name for e in inbox}:
        taken = [e.consumed_position is not None for e in inbox if e.name == name]
        assert taken == sorted(taken, reverse=True), (
            f"{run_id}: event {name!r} consumed out of order: {taken}"
        )
    at = {step.position: step for step in steps}
    for event in inbox:
        if event.consumed_position is None:
            continue
        step = at.get(event.consumed_position)
        assert step is not None, f"{run_id}: event {event} has no step"
        assert step.status is StepStatus.COMPLETED and step.output == event.payload, (
            f"{run_id}: step {step} does not hold event {event}"
        )
        assert step.input == b'j{"event":#%d}' % event.id, (
            f"{run_id}: step {step} names another event"
        )
