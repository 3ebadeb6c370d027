"""The model's state over plain dictionaries: runs, histories, inboxes, declared queues,
rate logs and debounced runs, the orders it keeps (creation, naps, sending), and the
facts about them every part of the model asks (a run's next position, a live slot, a
hung attempt)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from durable.core.events import Event
from durable.core.queues import Queue
from durable.core.records import NewRun, RunStatus, Step, StepStatus
from tests.backends._model_records import RunView


@dataclass
class ModelState:
    """The state every backend must show; `Model` (tests/backends/_backend_model.py)
    adds the `Backend` contracts over it, one concept per base class."""

    runs: dict[str, RunView] = field(default_factory=dict)
    history: dict[str, dict[int, Step]] = field(default_factory=dict)
    inbox: dict[str, list[Event]] = field(default_factory=dict)
    #: creation order (claim_next takes the oldest first).
    created: dict[str, int] = field(default_factory=dict)
    #: the order of the timers of napping runs (wake_due takes the most overdue first).
    napped: dict[str, int] = field(default_factory=dict)
    #: the limits each queue declares (a queue without a row has none).
    queues: dict[str, Queue] = field(default_factory=dict)
    #: queue -> how many start times its rate's log holds.
    rate_log: dict[str, int] = field(default_factory=dict)
    #: (workflow, key) -> the run `debounce_run` last created for it.
    debounced: dict[tuple[str, str], str] = field(default_factory=dict)
    _clock: itertools.count[int] = field(default_factory=itertools.count)
    #: the ids of events, in sending order (`observe` shows each backend's so).
    _sent: itertools.count[int] = field(default_factory=itertools.count)

    def next_position(self, run_id: str) -> int:
        """The position after the last step (a fork's history may have gaps)."""
        return max(self.history.get(run_id, {}), default=-1) + 1

    def _add(self, new: NewRun, run: RunView) -> None:
        """A run created (its queue's row: `_ensure_queue`, before)."""
        self.runs[new.id] = run
        self.history[new.id] = {}
        self.created[new.id] = next(self._clock)

    def _live(self, run_id: str) -> bool:
        """Whether the run holds a slot of its queue: RUNNING on a live lease."""
        run = self.runs[run_id]
        return run.status is RunStatus.RUNNING and run.lease == "live"

    def _hung(self, run_id: str) -> bool:
        """Whether a task attempt of the run is past its heartbeat deadline: a RUNNING
        step with a ``wake_at`` (the machine writes them in 1970: always past)."""
        return any(
            step.status is StepStatus.RUNNING and step.wake_at is not None
            for step in self.history.get(run_id, {}).values()
        )
