"""The memory backend's tallies: counted from its runs and histories when asked (see
`durable.core.tallies`), the way the SQL triggers count them as rows change.

A mixin of `MemoryBackend`. A purged run's counts go with it here (the SQL tallies
keep them), and a task call counts as soon as it ends (the SQL backends count a run's
calls when its execution ends): memory backends are for tests, which do not look at
either difference.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from durable.core import tallies as counting
from durable.core.records import StepKind
from durable.core.tallies import Tally

from ._base import MemoryBase


class MemoryTallies(MemoryBase):
    """`TallyStore` for `MemoryBackend` (see there for the contracts)."""

    def tallies(
        self,
        grain: int,
        since: float,
        *,
        kind: str | None = None,
        name: str | None = None,
        workflow: str | None = None,
        by_bucket: bool = True,
        by_bin: bool = True,
    ) -> Sequence[Tally]:
        """See `TallyStore.tallies`."""
        with self._lock:
            self._check_open()
            found = list(self._count(grain))
        return counting.select(
            found,
            grain,
            since,
            kind=kind,
            name=name,
            workflow=workflow,
            by_bucket=by_bucket,
            by_bin=by_bin,
        )

    def _count(self, grain: int) -> Iterator[Tally]:
        for run in self._runs.values():
            yield counting.of_run(
                grain, run.workflow, run.status, run.created_at, run.started_at, run.finished_at
            )
        for run_id, of, workflow, outcome in self._attempts:
            yield from counting.of_retried(grain, of, outcome, workflow, self._runs.get(run_id))
        for run_id, steps in self._history.items():
            owner = self._runs.get(run_id)
            for step in steps.values():
                if step.kind is StepKind.TASK:
                    tally = counting.of_task(
                        grain,
                        "" if owner is None else owner.workflow,
                        step.name,
                        step.status,
                        step.started_at,
                        step.finished_at,
                    )
                    if tally is not None:
                        yield tally

    def status_counts(self, statuses: Sequence[str]) -> dict[str, int]:
        """See `TallyStore.status_counts`."""
        with self._lock:
            self._check_open()
            found = dict.fromkeys(statuses, 0)
            for run in self._runs.values():
                if run.status in found:
                    found[run.status] += 1
            return found
