"""The state machine's rules of a run's history: a step recorded (first writer wins), a
task's result with the next task's start in one commit, a task attempt's heartbeat."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from durable.backends import Backend
from durable.core.records import StepStatus
from tests.backends._machine_answers import _stored
from tests.backends._machine_base import MachineBase, runs
from tests.backends._machine_strategies import SHIFT
from tests.backends._model_views import view_step


class HistoryRules(MachineBase):
    """Recording steps and heart-beating task attempts."""

    @rule(
        run_id=runs,
        shift=SHIFT,
        back=st.integers(0, 2),
        status=st.sampled_from(
            (
                StepStatus.COMPLETED,
                StepStatus.FAILED,
                StepStatus.RETRYING,
                StepStatus.WAITING,
                StepStatus.RUNNING,
            )
        ),
    )
    def record(self, run_id: str, shift: int, back: int, status: StepStatus) -> None:
        """record: at the next position, or *back* positions before it (first writer wins)."""
        epoch = self._epoch(run_id, shift)
        position = max(0, self.model.next_position(run_id) - back)
        step = self._step(run_id, position, status)
        expected = self.model.record(step, epoch)
        self._on_all(
            f"record({step}, {epoch})",
            expected,
            lambda b: _stored(b, b.record(step, epoch)),
        )

    @rule(run_id=runs, shift=SHIFT, back=st.integers(0, 2))
    def record_pair(self, run_id: str, shift: int, back: int) -> None:
        """record_steps: a task's result with the next task's start, in one commit."""
        epoch = self._epoch(run_id, shift)
        position = max(0, self.model.next_position(run_id) - back)
        steps = [
            self._step(run_id, position, StepStatus.COMPLETED),
            self._step(run_id, position + 1, StepStatus.RUNNING),
        ]
        expected = self.model.record_steps(steps, epoch)

        def record(backend: Backend) -> object:
            stored, flags = backend.record_steps(steps, epoch)
            return [view_step(backend, s) for s in stored], flags

        self._on_all(f"record_steps({steps}, {epoch})", expected, record)

    @rule(
        run_id=runs,
        shift=SHIFT,
        back=st.integers(0, 1),
        attempt_shift=st.integers(-1, 0),
        details=st.sampled_from((None, b'j{"done":1}', b'j{"done":2,"of":3}')),
    )
    def beat(
        self, run_id: str, shift: int, back: int, attempt_shift: int, details: bytes | None
    ) -> None:
        """heartbeat: only the running attempt at its position, at the run's epoch."""
        epoch = self._epoch(run_id, shift)
        position = max(0, self.model.next_position(run_id) - 1 - back)
        stored = self.model.history.get(run_id, {}).get(position)
        attempt = (stored.attempts if stored is not None else 1) + attempt_shift
        expected = self.model.heartbeat(run_id, position, epoch, attempt, details)
        self._on_all(
            f"heartbeat({run_id!r}, {position}, {epoch}, {attempt}, {details!r})",
            expected,
            lambda b: b.heartbeat(run_id, position, epoch, attempt, details),
        )
