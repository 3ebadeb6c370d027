"""The state machine's rules of chains and forks: a run continued as new (its successor
``<id>~n`` takes its requests, unconsumed events and unfinished children) and a run
forked (a new run holding copies of its finished steps)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import MultipleResults, multiple, rule

from durable.core.chains import successor_id
from durable.core.records import NewRun, RunStatus, StepStatus
from tests.backends._machine_answers import _forked, _handed_over
from tests.backends._machine_base import MachineBase, runs
from tests.backends._machine_strategies import SHIFT, VERSION, WORKFLOWS
from tests.backends._model_records import FORK, OBSERVED, RUN_IDS, RunView


class ChainRules(MachineBase):
    """Continuing runs as new and forking them."""

    def _like(self, run_id: str, new_id: str, **fields: Any) -> NewRun:
        """A queued run *new_id* with the options of *run_id* (as the runtime makes a
        successor or a fork: workflow, call, queue, priority, timeout, key and limit),
        *fields* over them."""
        new = NewRun(
            id=new_id, workflow=WORKFLOWS[0], input=b"j[]", call_hash="v1:", owner=None, lease=0.0
        )
        run = self.model.runs.get(run_id)
        if run is not None:
            new = dataclasses.replace(
                new,
                workflow=run.workflow,
                input=run.input,
                call_hash=run.call_hash,
                queue=run.queue,
                priority=run.priority,
                timeout=run.timeout,
                key=run.key,
                key_limit=run.key_limit,
            )
        return dataclasses.replace(new, **fields)

    def _continuable(self, run_id: str, run: RunView) -> bool:
        """Whether *run_id* may hand over at its epoch: unfinished and top-level."""
        return not run.status.finished and run.parent is None

    def _hands_over(self, run_id: str, run: RunView) -> bool:
        """Whether *run_id* may hand over to a successor the dump shows."""
        return self._continuable(run_id, run) and successor_id(run_id) in OBSERVED

    @rule(
        target=runs,
        run_id=runs,
        shift=SHIFT,
        back=st.sampled_from((None, 0, 1)),
        version=VERSION,
        steer=st.booleans(),
    )
    def continue_run(
        self, run_id: str, shift: int, back: int | None, version: str | None, steer: bool = False
    ) -> MultipleResults[str]:
        """continue_run: an unfinished top-level run ends CONTINUED and its successor
        (`<id>~n`, with the run's options, a new call and *version*) is queued with the
        run's requests, unconsumed events and unfinished children. With its last step
        (unless *back* is None) at the next position or over the one before, and maybe a
        snapshot. Fenced by epoch; a taken successor id (TAKEN) is an
        IdempotencyConflict. Only where the successor's id is observed (LINKS): steered
        to a run that can hand over so, one with events to move or RUNNING first."""
        run_id = self._steer(
            run_id,
            steer,
            lambda i, run: self._hands_over(i, run) and self.model.has_events(i, None),
            lambda i, run: self._hands_over(i, run) and run.status is RunStatus.RUNNING,
            self._hands_over,
        )
        epoch = self._epoch(run_id, shift)
        run = self.model.runs.get(run_id)
        hands_over = run is not None and run.epoch == epoch and self._continuable(run_id, run)
        if hands_over and successor_id(run_id) not in OBSERVED:
            return multiple()  # a successor the dump would not show
        n = next(self.serial)
        successor = self._like(
            run_id,
            successor_id(run_id),
            input=b'j["next %d"]' % n,
            call_hash=f"v1:next-{n}",
            version=version,
        )
        last = None
        if back is not None:
            position = max(0, self.model.next_position(run_id) - back)
            last = self._step(run_id, position, StepStatus.COMPLETED)
        state = b'j{"end":%d}' % n if n % 2 else None
        expected = self.model.continue_run(run_id, epoch, successor, last_step=last, state=state)
        self._on_all(
            f"continue_run({run_id!r}, {epoch}, {successor}, last_step={last}, state={state!r})",
            expected,
            lambda b: _handed_over(
                b,
                b.continue_run(run_id, epoch, successor, last_step=last, state=state),
                successor.id,
            ),
        )
        return multiple(successor.id) if expected is True else multiple()

    @rule(
        target=runs,
        original=runs,
        new_id=st.sampled_from((FORK, FORK, *RUN_IDS)),
        fresh=st.booleans(),
        back=st.integers(-1, 2),
        version=VERSION,
        steer=st.booleans(),
    )
    def fork(
        self,
        *,
        original: str,
        new_id: str,
        fresh: bool,
        back: int,
        version: str | None,
        steer: bool = False,
    ) -> MultipleResults[str]:
        """fork_run: a queued run of the original's options and *version*, its origin the
        original, holding copies of the original's finished steps below *before* (the
        next position less *back*); None, writing nothing, if *new_id* is taken. With
        *fresh*, the first id from *new_id* on (FORK, then RUN_IDS) that no run has, if
        any. Steered to an original with a finished step."""
        original = self._steer(
            original,
            steer,
            lambda i, _: any(s.status.finished for s in self.model.history[i].values()),
        )
        if fresh:
            ids = (FORK, *RUN_IDS)
            circle = ids[ids.index(new_id) :] + ids
            new_id = next((i for i in circle if i not in self.model.runs), new_id)
        before = max(0, self.model.next_position(original) - back)
        new = self._like(original, new_id, version=version, origin=original)
        expected = self.model.fork_run(original, new, before)
        self._on_all(
            f"fork_run({original!r}, {new}, before={before})",
            expected,
            lambda b: _forked(b, b.fork_run(original, new, before=before)),
        )
        return multiple(new_id) if expected is not None else multiple()
