"""The model's histories and inboxes: steps recorded (first writer wins, a position
written over keeps its first start), task heartbeats, events sent (along a chain, once
per key) and consumed, each answered with the run's requests."""

from __future__ import annotations

import dataclasses

from durable.core.chains import successor_id
from durable.core.events import Event
from durable.core.records import CANCEL_REQUEST, PAUSE_REQUEST, RunStatus, Step, StepStatus
from tests.backends._model_records import Raised, RunView
from tests.backends._model_waits import ModelWaits


class ModelHistory(ModelWaits):
    """`record`, `record_steps`, `heartbeat`, `send_event`, `consume_event`, `has_events`."""

    def record(self, step: Step, epoch: int) -> tuple[Step, int] | Raised:
        """`Backend.record`: the step as stored, and the run's requests."""
        run = self.runs.get(step.run_id)
        if run is None or run.epoch != epoch:
            return Raised("LeaseLost", step.run_id)
        steps = self.history[step.run_id]
        existing = steps.get(step.position)
        if existing is not None and existing.status.finished:
            return existing, _requests(run)
        stored = dataclasses.replace(step, epoch=epoch)
        steps[step.position] = _keep_first_start(stored, existing)
        return stored, _requests(run)

    def record_steps(self, steps: list[Step], epoch: int) -> tuple[list[Step], int] | Raised:
        """`Backend.record_steps`: each as `record` would, in one commit."""
        run = self.runs.get(steps[0].run_id)
        if run is None or run.epoch != epoch:
            return Raised("LeaseLost", steps[0].run_id)
        done = [self.record(step, epoch) for step in steps]
        return [d[0] for d in done if isinstance(d, tuple)], _requests(run)

    def heartbeat(
        self, run_id: str, position: int, epoch: int, attempt: int, details: bytes | None
    ) -> bool | Raised:
        """`Backend.heartbeat`: stamps a running attempt; True (nothing written) on a
        cancel request; LeaseLost when fenced or no longer that attempt."""
        run = self.runs.get(run_id)
        step = self.history[run_id].get(position) if run is not None else None
        if (
            run is None
            or step is None
            or run.epoch != epoch
            or step.status is not StepStatus.RUNNING
            or step.attempts != attempt
        ):
            return Raised("LeaseLost", run_id)
        if run.cancel:
            return True
        self.history[run_id][position] = dataclasses.replace(
            step, heartbeat_at=0.0, details=step.details if details is None else details
        )
        return False

    def send_event(
        self, run_id: str, name: str, payload: bytes, *, key: str | None, sender: str | None
    ) -> Event | Raised:
        """`Backend.send_event`: a CONTINUED run's chain is followed (a key seen by a
        run on the way counts as seen)."""
        while True:
            run = self.runs.get(run_id)
            if run is None:
                return Raised("RunNotFound", run_id)
            inbox = self.inbox.setdefault(run_id, [])
            earlier = next((e for e in inbox if key is not None and e.key == key), None)
            if earlier is not None:
                return earlier
            if run.status is not RunStatus.CONTINUED:
                break
            run_id = successor_id(run_id)
        if run.status.finished:
            return Raised("RunFinished", run_id)
        event = Event(
            id=next(self._sent),
            run_id=run_id,
            name=name,
            payload=payload,
            sent_at=0.0,
            sender=sender,
            key=key,
        )
        inbox.append(event)
        self._wake(run_id, f"event:{name}")
        return event

    def consume_event(
        self, step: Step, epoch: int, name: str | None, exclude: str | None = None
    ) -> tuple[Step, int] | Raised | None:
        """`Backend.consume_event`: the oldest unconsumed event *name*, or of any name but
        *exclude* if *name* is None (the stored step takes the event's name)."""
        run = self.runs.get(step.run_id)
        if run is None or run.epoch != epoch:
            return Raised("LeaseLost", step.run_id)
        steps = self.history[step.run_id]
        existing = steps.get(step.position)
        if existing is not None and existing.status.finished:
            return existing, _requests(run)
        inbox = self.inbox.get(step.run_id, [])
        index = next(
            (
                i
                for i, e in enumerate(inbox)
                if e.consumed_position is None
                and (e.name == name if name is not None else e.name != exclude)
            ),
            None,
        )
        if index is None:
            return None
        event = inbox[index]
        inbox[index] = dataclasses.replace(event, consumed_position=step.position)
        stored = dataclasses.replace(
            step,
            name=event.name,
            status=StepStatus.COMPLETED,
            input=b'j{"event":#%d}' % event.id,
            output=event.payload,
            epoch=epoch,
        )
        steps[step.position] = _keep_first_start(stored, existing)
        return stored, _requests(run)

    def has_events(self, run_id: str, exclude: str | None) -> bool:
        """`Backend.has_events`: an unconsumed event not named *exclude* (False for an
        unknown run)."""
        return any(
            e.consumed_position is None and e.name != exclude for e in self.inbox.get(run_id, [])
        )


def _requests(run: RunView) -> int:
    """What `record` and `consume_event` answer: the run's requests, as bits."""
    return (CANCEL_REQUEST if run.cancel else 0) | (PAUSE_REQUEST if run.pause else 0)


def _keep_first_start(step: Step, replaced: Step | None) -> Step:
    """A position written over (it was retrying or waiting) keeps its first start; the
    writer is answered with its own step all the same."""
    if replaced is None:
        return step
    return dataclasses.replace(
        step,
        started_at=replaced.started_at,
        details=replaced.details,
        state=replaced.state if step.state is None else step.state,
    )
