"""The memory backend's waits: suspending runs, waking them, their inboxes, and watches.

A mixin of `MemoryBackend` (it shares that class's lock and dictionaries, see
`MemoryBase`): when a run may sleep, what wakes it, and how events reach it; the
reference for what `sql/_waits.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from durable.backends._hub import Watch
from durable.backends._protocol.waits import TIMERS
from durable.core.chains import successor_id
from durable.core.events import Event
from durable.core.records import RunStatus, Step, StepStatus, awaited, requests
from durable.errors import LeaseLost, RunFinished, RunNotFound

from ._base import MemoryBase, written_over


class MemoryWaits(MemoryBase):
    """`WaitStore` for `MemoryBackend` (see there for the contracts)."""

    def _wake(self, run_id: str | None, waiting_on: str | None) -> list[str]:
        """Queue *run_id* if it is WAITING (on *waiting_on*, unless None); the topics to
        notify once the lock is released (none if it was not woken)."""
        run = self._runs.get(run_id) if run_id else None
        if run is None or run.status is not RunStatus.WAITING:
            return []
        if waiting_on is not None and run.waiting_on != waiting_on:
            named, any_event = awaited(run.waiting_on)
            if named != waiting_on and not (any_event and waiting_on.startswith("event:")):
                return []
        self._runs[run.id] = dataclasses.replace(
            run, status=RunStatus.QUEUED, wake_at=None, waiting_on=None, updated_at=self.now()
        )
        return [f"run:{run.id}", f"queue:{run.queue}"]

    def suspend_run(
        self, run_id: str, epoch: int, *, wake_at: float | None, waiting_on: str | None
    ) -> RunStatus | None:
        """See `WaitStore.suspend_run`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
                return None
            now = self.now()
            over = (wake_at is not None and wake_at <= now) or self._satisfied(run_id, waiting_on)
            status = RunStatus.QUEUED if over else RunStatus.WAITING
            also = f"queue:{run.queue}" if over else TIMERS if wake_at is not None else None
            self._runs[run_id] = dataclasses.replace(
                run,
                status=status,
                lease_owner=None,
                lease_until=None,
                updated_at=now,
                wake_at=None if over else wake_at,
                waiting_on=None if over else waiting_on,
            )
        self._notify([f"run:{run_id}"] + ([also] if also else []))
        return status

    def _satisfied(self, run_id: str, waiting_on: str | None) -> bool:
        waiting_on, any_event = awaited(waiting_on)
        inbox = self._events.get(run_id, [])
        if any_event and any(e.consumed_position is None for e in inbox):
            return True
        if waiting_on is None:
            return False
        kind, _, name = waiting_on.partition(":")
        if kind == "event":
            return any(e.name == name and e.consumed_position is None for e in inbox)
        other = self._runs.get(name)
        return other is not None and other.status.finished

    def wake_due(self, *, limit: int) -> int:
        """See `WaitStore.wake_due`."""
        with self._lock:
            self._check_open()
            now = self.now()
            due = sorted(
                (
                    r
                    for r in self._runs.values()
                    if r.status is RunStatus.WAITING and r.wake_at is not None and r.wake_at <= now
                ),
                key=lambda r: r.wake_at or 0.0,
            )[:limit]
            topics = [topic for run in due for topic in self._wake(run.id, None)]
        self._notify(topics)
        return len(due)

    def next_wake(self) -> float | None:
        """See `WaitStore.next_wake`."""
        with self._lock:
            self._check_open()
            times = [
                r.wake_at
                for r in self._runs.values()
                if r.status is RunStatus.WAITING and r.wake_at is not None
            ]
            return min(times) - self.now() if times else None

    def send_event(
        self,
        run_id: str,
        name: str,
        payload: bytes,
        *,
        key: str | None = None,
        sender: str | None = None,
    ) -> Event:
        """See `WaitStore.send_event`."""
        with self._lock:
            self._check_open()
            while True:
                run = self._runs.get(run_id)
                if run is None:
                    raise RunNotFound(f"No run has the id {run_id!r}.", run_id=run_id)
                inbox = self._events.setdefault(run_id, [])
                earlier = next((e for e in inbox if key is not None and e.key == key), None)
                if earlier is not None:
                    return earlier
                if run.status is not RunStatus.CONTINUED:
                    break
                run_id = successor_id(run_id)  # the chain goes on there
            if run.status.finished:
                raise RunFinished(
                    f"Run {run_id!r} has finished ({run.status}); it will never receive "
                    f"event {name!r}.",
                    run_id=run_id,
                    status=run.status.value,
                )
            event = Event(
                id=next(self._event_ids),
                run_id=run_id,
                name=name,
                payload=payload,
                sent_at=self.now(),
                sender=sender,
                key=key,
            )
            inbox.append(event)
            woken = self._wake(run_id, f"event:{name}")
        self._notify(woken)
        return event

    def consume_event(
        self, step: Step, epoch: int, name: str | None, *, exclude: str | None = None
    ) -> tuple[Step, int] | None:
        """See `WaitStore.consume_event`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(step.run_id)
            if run is None or run.epoch != epoch:
                raise LeaseLost(
                    f"Run {step.run_id!r} is no longer at epoch {epoch}; another owner took it.",
                    run_id=step.run_id,
                    epoch=epoch,
                )
            existing = self._history[step.run_id].get(step.position)
            if existing is not None and existing.status.finished:
                return existing, requests(run)
            inbox = self._events.get(step.run_id, [])
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
                input=b'j{"event":%d}' % event.id,
                output=event.payload,
                epoch=epoch,
            )
            # As in `record`: a waiting position written over keeps its first start.
            self._history[step.run_id][step.position] = written_over(stored, existing)
            return stored, requests(run)

    def has_events(self, run_id: str, *, exclude: str | None = None) -> bool:
        """See `WaitStore.has_events`."""
        with self._lock:
            self._check_open()
            return any(
                e.consumed_position is None and e.name != exclude
                for e in self._events.get(run_id, [])
            )

    def events(self, run_id: str) -> Sequence[Event]:
        """See `WaitStore.events`."""
        with self._lock:
            self._check_open()
            return list(self._events.get(run_id, []))

    def watch(self, topics: Sequence[str]) -> Watch:
        """See `WaitStore.watch`. Only this process's changes are heard."""
        return self._hub.watch(topics)
