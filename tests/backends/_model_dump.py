"""The model's state as `observe` reads it from a backend (`Model.dump`): its runs,
histories and inboxes, and what the listing calls answer (recoverable runs, queued
workflows, the next wake, published snapshots, queues, next starts and usage)."""

from __future__ import annotations

from durable.core.records import RunStatus
from tests.backends._model_flow import ModelFlowControl
from tests.backends._model_records import (
    HOSTS,
    OBSERVED,
    QUEUE_NAMES,
    QUEUE_SETS,
    Dump,
    RunView,
)


class ModelDump(ModelFlowControl):
    """The `Dump` of the model's state."""

    def dump(self) -> Dump:
        """The state, as `observe` reads it from a backend."""
        runs: dict[str, RunView | None] = {r: self.runs.get(r) for r in OBSERVED}
        waiting = [r for r in self.runs.values() if r.status is RunStatus.WAITING and r.wake]
        return Dump(
            runs=runs,
            history={
                r: tuple(s for _, s in sorted(self.history.get(r, {}).items())) for r in OBSERVED
            },
            events={r: tuple(self.inbox.get(r, [])) for r in OBSERVED},
            recoverable={host: self._recoverable(host) for host in HOSTS},
            queued_workflows={
                name: tuple(
                    sorted(
                        {
                            r.workflow
                            for r in self.runs.values()
                            if r.status is RunStatus.QUEUED and r.queue in queues
                        }
                    )
                )
                for name, queues in QUEUE_SETS.items()
            },
            next_wake=(
                "due" if any(r.wake == "due" for r in waiting) else "later" if waiting else None
            ),
            published={r: self._published(r) for r in OBSERVED},
            queues=tuple(self.queues[name] for name in sorted(self.queues)),
            next_start={name: self._next_start(name) for name in QUEUE_NAMES},
            usage=self._usage(),
        )

    def _next_start(self, name: str) -> str | None:
        queue = self.queues.get(name)
        if queue is None or queue.rate is None:
            return None
        return "now" if self._allowed(queue) > 0 else "later"

    def _usage(self) -> tuple[tuple[str, int, int, dict[str, int]], ...]:
        """`queue_usage`: queues with QUEUED or live RUNNING runs, or a row."""
        names = set(self.queues)
        queued: dict[str, int] = {}
        running: dict[str, int] = {}
        keys: dict[str, dict[str, int]] = {}
        for run_id, run in self.runs.items():
            if run.status is RunStatus.QUEUED:
                queued[run.queue] = queued.get(run.queue, 0) + 1
            elif self._live(run_id):
                running[run.queue] = running.get(run.queue, 0) + 1
                if run.key is not None:
                    held = keys.setdefault(run.queue, {})
                    held[run.key] = held.get(run.key, 0) + 1
            else:
                continue
            names.add(run.queue)
        return tuple(
            (name, queued.get(name, 0), running.get(name, 0), keys.get(name, {}))
            for name in sorted(names)
        )

    def _published(self, run_id: str) -> tuple[bytes | None] | None:
        """`state(run_id)`: the run's own snapshot, else its furthest step's."""
        run = self.runs.get(run_id)
        if run is None:
            return None
        held = [s.state for _, s in sorted(self.history.get(run_id, {}).items()) if s.state]
        return (run.state if run.state is not None else held[-1] if held else None,)

    def _recoverable(self, host: str) -> tuple[str, ...]:
        def needs_owner(run_id: str, run: RunView) -> bool:
            if run.status is RunStatus.BLOCKED:
                return True
            if run.status is RunStatus.QUEUED:
                return run.started
            if run.status is not RunStatus.RUNNING:
                return False
            mine = (run.owner or "").startswith(f"{host}:")
            return run.lease == "expired" or mine or self._hung(run_id)

        return tuple(sorted(i for i, run in self.runs.items() if needs_owner(i, run)))
