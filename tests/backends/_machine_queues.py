"""The state machine's rules of flow control: a queue's limits declared (from the start
in half the examples, or at any step), bursts of runs for the limits to meet, and
debounced runs."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import MultipleResults, initialize, multiple, precondition, rule

from durable.core.queues import Queue
from durable.core.records import NewRun
from tests.backends._machine_answers import _created
from tests.backends._machine_base import MachineBase, runs
from tests.backends._machine_strategies import KEYS, PRIORITY, QUEUES, WORKFLOWS
from tests.backends._model_records import FAR, GHOST, LEASE, PER, RUN_IDS


class QueueRules(MachineBase):
    """Queues' limits, bursts and debouncing."""

    @initialize(
        declare=st.booleans(),
        concurrency=st.sampled_from((None, 1, 2)),
        key_concurrency=st.sampled_from((None, 1)),
        rate=st.sampled_from((None, 1, 2, 3)),
        key_rate=st.sampled_from((None, 1, 2)),
    )
    def limits(
        self,
        declare: bool,
        concurrency: int | None,
        key_concurrency: int | None,
        rate: int | None,
        key_rate: int | None = None,
    ) -> None:
        """Limits on the default queue from the start, in half the examples (before or
        after the family is created: initialize rules come in any order)."""
        if declare:
            self.declare("default", concurrency, key_concurrency, rate, key_rate)

    @precondition(lambda self: any(run_id not in self.model.runs for run_id in RUN_IDS))
    @rule(
        target=runs,
        queue=st.sampled_from(QUEUES),
        plan=st.lists(
            st.tuples(
                st.sampled_from((None, *KEYS)),
                st.sampled_from((None, None, 1, 2)),
                st.sampled_from((0, 1)),
            ),
            min_size=len(RUN_IDS),
            max_size=len(RUN_IDS),
        ),
    )
    def burst(
        self, queue: str, plan: list[tuple[str | None, int | None, int]]
    ) -> MultipleResults[str]:
        """create_run of every id no run has yet, queued in one queue (a burst for its
        limits to meet), each maybe with a key (key, key limit, priority by *plan*)."""
        free = [run_id for run_id in RUN_IDS if run_id not in self.model.runs]
        for run_id, (key, key_limit, priority) in zip(free, plan[: len(free)], strict=True):
            self._create(
                run_id,
                None,
                queue,
                priority,
                "wf.a",
                same_call=True,
                parent=None,
                key=key,
                key_limit=None if key is None else key_limit,
            )
        return multiple(*free)

    @rule(
        target=runs,
        run_id=st.sampled_from(RUN_IDS),
        queue=st.sampled_from(QUEUES),
        priority=PRIORITY,
        workflow=st.sampled_from(WORKFLOWS),
        key=st.sampled_from(KEYS),
        key_limit=st.sampled_from((None, None, 1, 2)),
    )
    def debounce(
        self,
        *,
        run_id: str,
        queue: str,
        priority: int,
        workflow: str,
        key: str,
        key_limit: int | None,
    ) -> MultipleResults[str]:
        """debounce_run (a window never over): the pending run of (workflow, key) takes
        the new input, call hash, priority and key limit; else a new WAITING run is
        created, under the first id from *run_id* on that no run has."""
        slot = self.model.debounced.get((workflow, key))
        coalesced = slot is not None and self.model.pending(slot)
        free = [i for i in RUN_IDS[RUN_IDS.index(run_id) :] + RUN_IDS if i not in self.model.runs]
        if not free and not coalesced:
            return multiple()
        n = next(self.serial)
        new = NewRun(
            id=free[0] if free else GHOST,
            workflow=workflow,
            input=b'j["debounced %d"]' % n,
            call_hash=f"v1:debounced-{n}",
            owner=None,
            lease=LEASE,
            queue=queue,
            priority=priority,
            key=key,
            key_limit=key_limit,
        )
        expected = self.model.debounce_run(new)
        self._on_all(
            f"debounce_run({new}, window={FAR}, longest={2 * FAR})",
            expected,
            lambda b: _created(b, b.debounce_run(new, window=FAR, longest=2 * FAR)),
        )
        return multiple(new.id) if expected[1] else multiple()

    @rule(
        queue=st.sampled_from(QUEUES),
        concurrency=st.sampled_from((None, 1, 2)),
        key_concurrency=st.sampled_from((None, 1)),
        rate=st.sampled_from((None, 1, 2, 3)),
        key_rate=st.sampled_from((None, 1, 2)),
    )
    def declare(
        self,
        queue: str,
        concurrency: int | None,
        key_concurrency: int | None,
        rate: int | None,
        key_rate: int | None = None,
    ) -> None:
        """put_queue: the queue's limits replaced (its rate's log kept); claims respect
        them from then on. Every rate and key rate is per hour (PER)."""
        declared = Queue(
            name=queue,
            concurrency=concurrency,
            key_concurrency=key_concurrency,
            rate=rate,
            per=None if rate is None else PER,
            key_rate=key_rate,
            key_per=None if key_rate is None else PER,
        )
        expected = self.model.put_queue(declared)
        self._on_all(f"put_queue({declared})", expected, lambda b: b.put_queue(declared))
