"""The model's flow control (see durable.core.queues: choose, admits, allowed, record):
queues' limits, concurrency keys, rates and debounced runs.

The model keeps each queue's declared limits and, for its rate, only how many starts
its log holds. Rates are an hour long (`PER`), so no start ever leaves the window and
the log is just a count: its rate's allowance is `rate - count`.
"""

from __future__ import annotations

import dataclasses

from durable.core.queues import Queue
from durable.core.records import NewRun, RunStatus
from tests.backends._model_records import RunView
from tests.backends._model_state import ModelState


class ModelFlowControl(ModelState):
    """Which runs a queue's limits let a claim take; `put_queue`, `debounce_run`."""

    def _allowed(self, queue: Queue) -> int:
        """How many first starts the queue's rate allows now (no start leaves the hour)."""
        if queue.rate is None:
            return 1 << 31
        return max(0, queue.rate - self.rate_log.get(queue.name, 0))

    def _note_starts(self, queue: Queue, fresh: int) -> None:
        """The rate's log after a claim made *fresh* first starts: kept to `rate`; a
        claim that starts nothing leaves it as it is."""
        if queue.rate is not None and fresh:
            self.rate_log[queue.name] = min(self.rate_log.get(queue.name, 0) + fresh, queue.rate)

    def _choose(self, queue: Queue, ready: list[str], limit: int) -> list[str]:
        """`choose`: the key rule, then the rate's cap on first starts, then the slots."""
        running = [i for i, r in self.runs.items() if r.queue == queue.name and self._live(i)]
        cap = limit if queue.concurrency is None else min(limit, queue.concurrency - len(running))
        if cap <= 0:
            return []
        rank: dict[str, int] = {}
        fresh_rank: dict[str, int] = {}
        eligible: list[str] = []
        for run_id in ready:
            run = self.runs[run_id]
            if run.key is not None:
                rank[run.key] = rank.get(run.key, 0) + 1
                if not run.started:
                    fresh_rank[run.key] = fresh_rank.get(run.key, 0) + 1
                held = sum(1 for i in running if self.runs[i].key == run.key)
                bound = run.key_limit if run.key_limit is not None else queue.key_concurrency
                if bound is not None and rank[run.key] + held > bound:
                    continue
                recent = self._key_starts(queue.name, run.key)
                late = queue.key_rate is not None and not run.started
                if late and fresh_rank[run.key] + recent > (queue.key_rate or 0):
                    continue
            eligible.append(run_id)
        room, fresh, chosen = self._allowed(queue), 0, []
        for run_id in eligible:
            if not self.runs[run_id].started:
                fresh += 1
                if fresh > room:
                    continue
            chosen.append(run_id)
        chosen = chosen[:cap]
        self._note_starts(queue, sum(1 for i in chosen if not self.runs[i].started))
        return chosen

    def _key_starts(self, queue: str, key: str) -> int:
        """A key's first starts inside its key rate's window: every start of its runs
        (no start leaves the hour)."""
        return sum(1 for r in self.runs.values() if r.queue == queue and r.key == key and r.started)

    def _admitted(self, run_id: str) -> bool:
        """`admits`: whether the limits of the run's queue let it be claimed on its own
        (noted in the rate's log if so)."""
        run = self.runs[run_id]
        queue = self.queues.get(run.queue)
        if queue is None:
            return True
        others = [
            other
            for i, other in self.runs.items()
            if i != run_id and other.queue == run.queue and self._live(i)
        ]
        if queue.concurrency is not None and len(others) >= queue.concurrency:
            return False
        bound = run.key_limit if run.key_limit is not None else queue.key_concurrency
        mates = sum(1 for other in others if other.key == run.key)
        if run.key is not None and bound is not None and mates >= bound:
            return False
        if not run.started and self._allowed(queue) <= 0:
            return False
        rated = queue.key_rate is not None and run.key is not None and not run.started
        if rated and self._key_starts(run.queue, run.key or "") >= (queue.key_rate or 0):
            return False
        self._note_starts(queue, 0 if run.started else 1)
        return True

    def _ensure_queue(self, new: NewRun) -> None:
        """A run with a key limit of its own gives its queue a row (no limits)."""
        if new.key_limit is not None and new.queue not in self.queues:
            self.queues[new.queue] = Queue(name=new.queue)

    def put_queue(self, queue: Queue) -> Queue:
        """`Backend.put_queue`: the limits replaced, the rate's log kept."""
        self.queues[queue.name] = queue
        return queue

    def debounce_run(self, new: NewRun) -> tuple[RunView, bool]:
        """`Backend.debounce_run` with a window never over: the pending run of the
        workflow and key takes *new*'s input, call hash, priority and key limit;
        without one, *new* is created WAITING (its id must be new)."""
        assert new.key is not None
        self._ensure_queue(new)
        slot = (new.workflow, new.key)
        pending = self.debounced.get(slot)
        if pending is not None and self.pending(pending):
            self.runs[pending] = run = dataclasses.replace(
                self.runs[pending],
                input=new.input,
                call_hash=new.call_hash,
                priority=new.priority,
                key_limit=new.key_limit,
            )
            return run, False
        assert new.id not in self.runs, "debounce_run under an id that is taken"
        run = RunView(
            workflow=new.workflow,
            input=new.input,
            call_hash=new.call_hash,
            parent=None,
            queue=new.queue,
            priority=new.priority,
            status=RunStatus.WAITING,
            epoch=0,
            owner=None,
            lease=None,
            recoveries=0,
            cancel=False,
            started=False,
            wake="later",
            timeout=new.timeout,
            key=new.key,
            key_limit=new.key_limit,
        )
        self._add(new, run)
        self.debounced[slot] = new.id
        return run, True

    def pending(self, run_id: str) -> bool:
        """Whether a debounced run has not started: WAITING on its timer alone."""
        run = self.runs[run_id]
        return run.status is RunStatus.WAITING and not run.started and run.waiting_on is None
