"""The state machine's rules of waits: a run suspended on a timer (long past or an hour
away), a child, a run or an event; a nap (a timer NAP seconds away, slept past); and
the due runs woken."""

from __future__ import annotations

import time

from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from durable.backends import Backend
from durable.core.records import RunStatus
from tests.backends._machine_base import MachineBase, runs
from tests.backends._machine_strategies import NAP, SHIFT, WAITING_ON
from tests.backends._model_records import ANY_EVENT, FAR, PAST


class WaitRules(MachineBase):
    """Suspending runs and waking them."""

    def _waiting_on(self, run_id: str, waiting: str, other: str) -> str | None:
        if waiting.startswith(ANY_EVENT):
            named = self._waiting_on(run_id, waiting.removeprefix(ANY_EVENT), other)
            return ANY_EVENT + (named or "")
        if waiting == "nothing":
            return None
        if waiting == "its child":
            children = sorted(i for i, r in self.model.runs.items() if r.parent == run_id)
            return f"run:{children[0] if children else other}"
        return f"run:{other}" if waiting == "a run" else waiting

    @rule(
        run_id=runs,
        shift=SHIFT,
        timer=st.sampled_from((None, "past", "later")),
        waiting=WAITING_ON,
        other=runs,
        steer=st.booleans(),
    )
    def suspend(
        self,
        *,
        run_id: str,
        shift: int,
        timer: str | None,
        waiting: str,
        other: str,
        steer: bool = False,
    ) -> None:
        """suspend_run: WAITING, or QUEUED at once if the wait is already over. Steered
        to a RUNNING run."""
        run_id = self._steer(run_id, steer, lambda _, run: run.status is RunStatus.RUNNING)
        epoch = self._epoch(run_id, shift)
        waiting_on = self._waiting_on(run_id, waiting, other)
        if timer is None and waiting_on is None:
            waiting_on = "event:go"
        offset = {None: None, "past": PAST, "later": FAR}[timer]
        expected = self.model.suspend_run(run_id, epoch, timer=timer, waiting_on=waiting_on)
        self._on_all(
            f"suspend_run({run_id!r}, {epoch}, timer={timer}, waiting_on={waiting_on!r})",
            expected,
            lambda b: b.suspend_run(
                run_id,
                epoch,
                wake_at=None if offset is None else b.now() + offset,
                waiting_on=waiting_on,
            ),
        )

    @precondition(lambda self: self.naps_left > 0)
    @rule(run_id=runs, shift=SHIFT, waiting=WAITING_ON, other=runs)
    def nap(self, run_id: str, shift: int, waiting: str, other: str) -> None:
        """suspend_run with a timer NAP seconds away, then sleep until it is due."""
        epoch = self._epoch(run_id, shift)
        waiting_on = self._waiting_on(run_id, waiting, other)
        expected = self.model.suspend_run(run_id, epoch, timer="nap", waiting_on=waiting_on)
        deadlines: dict[int, float] = {}
        took: list[float] = []

        def suspend(backend: Backend) -> object:
            started = time.monotonic()
            wake_at = deadlines[id(backend)] = backend.now() + NAP
            status = backend.suspend_run(run_id, epoch, wake_at=wake_at, waiting_on=waiting_on)
            took.append(time.monotonic() - started)
            return status

        try:
            self._on_all(
                f"suspend_run({run_id!r}, {epoch}, wake_at=now+{NAP}, waiting_on={waiting_on!r})",
                expected,
                suspend,
            )
        except AssertionError:
            # A call slower than NAP may see its timer pass before the wait begins, and
            # rightly queue the run: such an example proves nothing and is thrown away.
            assume(max(took) < NAP)
            raise
        if expected is RunStatus.WAITING:
            self.naps_left -= 1
            for backend in self.backends.by_name.values():
                while backend.now() <= deadlines[id(backend)]:
                    time.sleep(0.01)

    @rule(limit=st.integers(1, 3))
    def wake_due(self, limit: int) -> None:
        """wake_due: the most overdue WAITING runs are queued."""
        expected = self.model.wake_due(limit)
        self._on_all(f"wake_due(limit={limit})", expected, lambda b: b.wake_due(limit=limit))
