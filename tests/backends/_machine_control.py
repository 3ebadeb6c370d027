"""The state machine's rules that end a run or control its tree: finish (with the last
step), cancel, pause, resume (reopening a cancelled run from a position), park."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from durable.core.records import RunStatus, StepStatus
from tests.backends._machine_base import MachineBase, runs
from tests.backends._machine_strategies import DROP, SHIFT
from tests.backends._model_records import ANY_EVENT, RunView
from tests.backends._model_views import view_run


class ControlRules(MachineBase):
    """Finishing, cancelling, pausing, resuming and parking runs."""

    def _cancelled_with_consumed_events(self, run_id: str, run: RunView) -> bool:
        inbox = self.model.inbox.get(run_id, [])
        consumed = any(e.consumed_position is not None for e in inbox)
        return run.status is RunStatus.CANCELLED and consumed

    def _worth_finishing(self, run_id: str, run: RunView) -> bool:
        """Whether *run_id* is unfinished and awaited by its parent, or consumed events."""
        if run.status.finished:
            return False
        if any(e.consumed_position is not None for e in self.model.inbox.get(run_id, [])):
            return True
        parent = self.model.runs.get(run.parent) if run.parent is not None else None
        return (
            parent is not None
            and parent.status is RunStatus.WAITING
            and (parent.waiting_on or "").removeprefix(ANY_EVENT) == f"run:{run_id}"
        )

    @rule(
        run_id=runs,
        shift=SHIFT,
        status=st.sampled_from(
            (
                RunStatus.COMPLETED,
                RunStatus.FAILED,
                RunStatus.CANCELLED,
                RunStatus.DEAD,
                RunStatus.TIMED_OUT,
                RunStatus.BLOCKED,
            )
        ),
        with_step=st.booleans(),
        steer=st.booleans(),
    )
    def finish(
        self, run_id: str, shift: int, status: RunStatus, with_step: bool, steer: bool = False
    ) -> None:
        """finish_run: fenced, once; a parent waiting on the run is queued; with the
        run's last step (over its start) in the same commit, if *with_step*. Steered to
        a run whose parent waits for it, or that consumed an event (to reopen it)."""
        run_id = self._steer(run_id, steer, self._worth_finishing)
        epoch = self._epoch(run_id, shift)
        n = next(self.serial)
        output = b"j%d" % n if status is RunStatus.COMPLETED else None
        error = None if status is RunStatus.COMPLETED else b'j"error %d"' % n
        last = None
        if with_step and status is not RunStatus.BLOCKED:
            position = max(0, self.model.next_position(run_id) - 1)
            last = self._step(run_id, position, StepStatus.COMPLETED)
        state = b'j{"end":%d}' % n if n % 2 and status is not RunStatus.BLOCKED else None
        expected = self.model.finish_run(
            run_id, epoch, status, output=output, error=error, last_step=last, state=state
        )
        self._on_all(
            f"finish_run({run_id!r}, {epoch}, {status!r}, output={output!r}, error={error!r}, "
            f"last_step={last}, state={state!r})",
            expected,
            lambda b: b.finish_run(
                run_id, epoch, status, output=output, error=error, last_step=last, state=state
            ),
        )

    @rule(run_id=runs)
    def cancel(self, run_id: str) -> None:
        """cancel_run: the run and its unfinished descendants are cancelled or asked to stop."""
        expected = self.model.cancel_run(run_id)
        self._on_all(
            f"cancel_run({run_id!r})", expected, lambda b: view_run(b, b.cancel_run(run_id))
        )

    @rule(run_id=runs)
    def pause(self, run_id: str) -> None:
        """pause_run: idle runs of the tree are PAUSED, running ones asked to pause."""
        expected = self.model.pause_run(run_id)
        self._on_all(f"pause_run({run_id!r})", expected, lambda b: view_run(b, b.pause_run(run_id)))

    @rule(run_id=runs, drop=DROP, steer=st.booleans())
    def resume(self, run_id: str, drop: str | None, steer: bool = False) -> None:
        """resume_run: paused runs of the tree are queued, pause requests withdrawn; with
        *drop* (see DROP), a CANCELLED run is reopened from there. Steered to a CANCELLED
        run with *drop*, else to a paused or asked one."""
        if drop is None:
            run_id = self._steer(
                run_id, steer, lambda _, run: run.pause or run.status is RunStatus.PAUSED
            )
        else:
            # One that consumed events first: reopened, it has them back.
            run_id = self._steer(
                run_id,
                steer,
                self._cancelled_with_consumed_events,
                lambda _, run: run.status is RunStatus.CANCELLED,
            )
        end = self.model.next_position(run_id)
        taken = [
            e.consumed_position
            for e in self.model.inbox.get(run_id, [])
            if e.consumed_position is not None
        ]
        drop_from = {
            None: None,
            "start": 0,
            "last": max(0, end - 1),
            "past": end,
            "an event": min(taken, default=0),
        }[drop]
        expected = self.model.resume_run(run_id, drop_from)
        self._on_all(
            f"resume_run({run_id!r}, drop_from={drop_from})",
            expected,
            lambda b: view_run(b, b.resume_run(run_id, drop_from=drop_from)),
        )

    @rule(run_id=runs, shift=SHIFT, steer=st.booleans())
    def park(self, run_id: str, shift: int, steer: bool = False) -> None:
        """park_run: the owner stops its RUNNING run: PAUSED if asked, else QUEUED.
        Steered to a run asked to pause."""
        run_id = self._steer(run_id, steer, lambda _, run: run.pause)
        epoch = self._epoch(run_id, shift)
        expected = self.model.park_run(run_id, epoch)
        self._on_all(
            f"park_run({run_id!r}, {epoch})", expected, lambda b: b.park_run(run_id, epoch)
        )
