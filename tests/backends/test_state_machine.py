"""A differential state machine over the storage backends: memory, SQLite, PostgreSQL.

Hypothesis drives random sequences of the `Backend` operations (create, claim, record,
heartbeat, expire, send, consume, suspend, wake, cancel, pause, resume, park, finish,
release; continue a run as new and fork one; flow control: declare a queue's limits,
create runs with a concurrency key and a limit of their own, in bursts, debounce)
through every backend at once and through a small reference model
(`_backend_model.Model`). Each call must give the
model's answer on every backend; after each step every backend's observable state
(`Dump`) must equal the model's, and the invariants of histories, epochs, outcomes and
inboxes must hold between consecutive states.

Time. The SQL backends judge leases and timers by the database clock, which a test
cannot move, so nothing here depends on how fast a step runs:

* expiry is `renew_leases(owner, -60)`: the owner's leases end a minute ago on each
  backend's own clock, which is what a lease looks like once its owner stopped
  heart-beating. Every other lease is an hour long;
* a timer is long past (the wait is over at once) or an hour away (never due), except
  in the `nap` rule (at most MAX_NAPS times an example): its timer is NAP seconds
  away, and the rule sleeps past it before anything is observed, so a napping run is
  due whenever it is looked at;
* every rate is per hour (PER) and every debounce window an hour (its longest two):
  no start leaves a rate's window, and no debounced run comes due.

Chains, forks and versions. `continue_run` ends a run CONTINUED and creates its
successor ``<id>~1`` (only the ids in LINKS, which the dump observes); `send_event`
follows a chain to its current run, and `create` may take a successor's id first
(TAKEN: the hand-over is then an IdempotencyConflict). `fork_run` copies a run's
finished steps into a new one. Runs are created with a code version and claims draw
one, maybe serving only it (`durable.core.run_options.serves`); the dump holds each
run's `version` and `origin`.

Flow control. Claims respect the queue's concurrency, each key's limit and the rate's
allowance of first starts (`Model._choose`, `Model._admitted`), and the dump holds
`list_queues`, `next_start` and `queue_usage`. Three differences it found between
memory and SQL are pinned by `test_flow_control_agrees` (memory now does as SQL).

PostgreSQL joins when DURABLE_TEST_POSTGRES_URL is set; DURABLE_REQUIRE_POSTGRES=1
makes a missing URL a failure, as everywhere in the suite.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from durable.backends import Backend, MemoryBackend
from durable.core.chains import successor_id
from durable.core.queues import Queue
from durable.core.records import NewRun, Run, RunStatus, Step, StepKind, StepStatus
from durable.core.run_options import PRIORITY_MAX, PRIORITY_MIN
from durable.errors import IdempotencyConflict, LeaseLost, RunFinished, RunNotFound
from tests.backends._backend_model import (
    ANY_EVENT,
    EXPIRED,
    FAR,
    FORK,
    GHOST,
    LEASE,
    OBSERVED,
    PAST,
    PER,
    RUN_IDS,
    Dump,
    Model,
    Raised,
    RunView,
    check_transition,
    describe_difference,
    observe,
    view_event,
    view_run,
    view_step,
)
from tests.conftest import POSTGRES_URL, REQUIRE_POSTGRES, PostgresSchemas

OWNERS = ("h1:1:a", "h1:2:b", "h2:1:c")
#: An owner that never holds a lease: named dead, it must not let anyone take a run.
STRANGER = "h3:9:z"
QUEUES = ("default", "mail")
WORKFLOWS = ("wf.a", "wf.b")
EVENT_NAMES = ("go", "stop")
#: Concurrency keys: runs of a key share its limit.
KEYS = ("k1", "k2")
#: How far away a napping run's timer is, in seconds. The nap rule sleeps that long.
NAP = 0.1
#: Naps per example: each one sleeps NAP seconds.
MAX_NAPS = 2
#: A successor's id that `create` may take first (as before such ids were reserved).
TAKEN = "r2~1"
#: Code versions of created runs and of claimers.
VERSION = st.sampled_from((None, None, "v1", "v2"))

SETTINGS = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    # Nothing is kept between runs (CI starts from a clean clone): a failure prints its
    # steps, which replay as written (see the tests at the end of this module).
    database=None,
    # Shrinking a failure takes minutes with PostgreSQL: shrink only one, and skip the
    # explain phase, whose line tracing makes every step many times slower.
    report_multiple_bugs=False,
    phases=[phase for phase in Phase if phase is not Phase.explain],
    suppress_health_check=[HealthCheck.too_slow],
)

OWNER = st.sampled_from(OWNERS)
#: Priorities: small ones that tie often, and the ends of the int4 range they must fit.
PRIORITY = st.sampled_from((0, 1, 2, PRIORITY_MIN, PRIORITY_MAX))
#: The epoch a call passes, relative to the run's: mostly its own, sometimes a stale one.
SHIFT = st.sampled_from((0, 0, 0, 0, 0, -1, 1))
#: Where `resume` reopens a cancelled run (`drop_from`): nowhere (None), at its first
#: position, its last, past its end, or at the first position that consumed an event.
DROP = st.sampled_from((None, None, "start", "last", "past", "an event"))
#: What a suspending run waits for, besides its timer (see `_waiting_on`); prefixed
#: "events|", any event ends the wait too (a workflow class with on_event).
WAITING_ON = st.sampled_from(
    (
        "its child",
        "its child",
        "event:go",
        "event:stop",
        "a run",
        "nothing",
        "events|its child",
        "events|its child",
        "events|event:go",
        "events|nothing",
    )
)


class Backends:
    """One memory, one SQLite and (if configured) one PostgreSQL backend, all empty."""

    def __init__(self, tmp_path: Path, postgres_url: str | None, number: int) -> None:
        from durable.backends.sql import SQLBackend

        self._schemas = PostgresSchemas(postgres_url) if postgres_url else None
        self._sqlite_file = tmp_path / f"machine{number}.db"
        self.by_name: dict[str, Backend] = {}
        try:
            self.by_name["memory"] = MemoryBackend()
            # NORMAL: no fsync per commit. The same statements, in a fraction of the time.
            self.by_name["sqlite"] = SQLBackend(f"sqlite:///{self._sqlite_file}?synchronous=NORMAL")
            if self._schemas is not None:
                self.by_name["postgres"] = SQLBackend(self._schemas.new_url())
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for backend in self.by_name.values():
            backend.close()
        if self._schemas is not None:
            self._schemas.drop_all()  # the schema of this example, and its tables
        self._sqlite_file.unlink(missing_ok=True)  # shrinking makes thousands of them


class BackendMachine(RuleBasedStateMachine):
    """Applies each step to every backend and to the model; they must stay equal."""

    #: the ids of runs created so far (steps act on those; `unknown_run` on others).
    runs: Bundle[str] = Bundle("runs")

    def __init__(self, open_backends: Callable[[], Backends]) -> None:
        super().__init__()
        self.backends = open_backends()
        self.model = Model()
        self.previous: Dump | None = None
        #: the last step passed a stale epoch: it must not have changed anything.
        self.fenced = False
        self.naps_left = MAX_NAPS
        self.serial = itertools.count(1)

    def teardown(self) -> None:
        self.backends.close()

    # -- helpers ----------------------------------------------------------------------

    def _on_all(self, what: str, expected: object, call: Callable[[Backend], object]) -> None:
        """Run *call* on every backend; each must give the model's *expected* answer."""
        got: dict[str, object] = {}
        for name, backend in self.backends.by_name.items():
            try:
                got[name] = call(backend)
            except (LeaseLost, RunNotFound, RunFinished, IdempotencyConflict) as error:
                got[name] = Raised(type(error).__name__, error.run_id)
        wrong = [name for name, value in got.items() if value != expected]
        if wrong:
            lines = [f"{what} gave a different answer on {', '.join(wrong)}:"]
            lines.append(f"  model:    {expected!r}")
            lines += [f"  {name + ':':9} {value!r}" for name, value in got.items()]
            raise AssertionError("\n".join(lines))

    def _epoch(self, run_id: str, shift: int) -> int:
        self.fenced = shift != 0
        run = self.model.runs.get(run_id)
        return (run.epoch if run is not None else 0) + shift

    def _steer(self, run_id: str, steer: bool, *wanted: Callable[[str, RunView], bool]) -> str:
        """*run_id*, or with *steer* the first run from it on (RUN_IDS in a circle) that
        the model shows as the first of *wanted* that any run is: for cases a rule would
        seldom meet by chance."""
        if not steer or run_id not in RUN_IDS:
            return run_id
        start = RUN_IDS.index(run_id)
        circle = RUN_IDS[start:] + RUN_IDS[:start]
        for test in wanted:
            for other in circle:
                run = self.model.runs.get(other)
                if run is not None and test(other, run):
                    return other
        return run_id

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

    # -- runs -------------------------------------------------------------------------

    @initialize(
        target=runs,
        owners=st.tuples(st.none() | OWNER, st.none() | OWNER, st.none() | OWNER),
        parent_of_r2=st.sampled_from(("r0", "r1", None)),
        queue=st.sampled_from(QUEUES),
        priority=PRIORITY,
        keys=st.tuples(*[st.sampled_from((None, None, *KEYS))] * 3),
    )
    def family(
        self,
        owners: tuple[str | None, str | None, str | None],
        parent_of_r2: str | None,
        queue: str,
        priority: int,
        keys: tuple[str | None, ...] = (None, None, None),
    ) -> MultipleResults[str]:
        """Three runs to begin with: r0, its child r1, and r2 below one of them or alone;
        each maybe with a concurrency key."""
        self._create(
            "r0", owners[0], "default", 1, "wf.a", same_call=True, parent=None, key=keys[0]
        )
        self._create(
            "r1", owners[1], queue, priority, "wf.b", same_call=True, parent="r0", key=keys[1]
        )
        self._create(
            "r2", owners[2], "default", 0, "wf.a", same_call=True, parent=parent_of_r2, key=keys[2]
        )
        return multiple("r0", "r1", "r2")

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

    @rule(
        target=runs,
        run_id=st.sampled_from((*RUN_IDS, TAKEN)),
        owner=st.none() | OWNER,
        queue=st.sampled_from(QUEUES),
        priority=PRIORITY,
        workflow=st.sampled_from(WORKFLOWS),
        same_call=st.booleans(),
        parent=st.none() | runs,
        timeout=st.none() | st.sampled_from((0.5, 3600.0)),
        key=st.sampled_from((None, None, *KEYS)),
        key_limit=st.sampled_from((None, None, 1, 2)),
        version=VERSION,
    )
    def create(
        self,
        *,
        run_id: str,
        owner: str | None,
        queue: str,
        priority: int,
        workflow: str,
        same_call: bool,
        parent: str | None,
        timeout: float | None = None,
        key: str | None = None,
        key_limit: int | None = None,
        version: str | None = None,
    ) -> MultipleResults[str]:
        """create_run: a new id is created (queued or owned, of *version*), a known id is
        returned as is, with the parent it was stored with whatever parent the call names
        (the engine tells a parent's own child from a foreign run at the child's id by
        it). With a *key*, maybe a limit of its own (its queue gets a row)."""
        if key is None:
            key_limit = None
        created = self._create(
            run_id,
            owner,
            queue,
            priority,
            workflow,
            same_call=same_call,
            parent=parent,
            timeout=timeout,
            key=key,
            key_limit=key_limit,
            version=version,
        )
        return multiple(run_id) if created else multiple()

    def _create(
        self,
        run_id: str,
        owner: str | None,
        queue: str,
        priority: int,
        workflow: str,
        *,
        same_call: bool,
        parent: str | None,
        timeout: float | None = None,
        key: str | None = None,
        key_limit: int | None = None,
        version: str | None = None,
    ) -> bool:
        call = run_id if same_call else "other"
        new = NewRun(
            id=run_id,
            workflow=workflow,
            input=f'j["{call}"]'.encode(),
            call_hash=f"v1:{call}",
            owner=owner,
            lease=LEASE,
            parent_id=None if parent == run_id else parent,
            queue=queue,
            priority=priority,
            timeout=timeout,
            key=key,
            key_limit=key_limit,
            version=version,
        )
        expected = self.model.create(new)
        self._on_all(f"create_run({new})", expected, lambda b: _created(b, b.create_run(new)))
        return expected[1]

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

    @rule(
        owner=OWNER,
        queue=st.sampled_from((*QUEUES, "default")),
        workflows=st.sampled_from((WORKFLOWS, WORKFLOWS, WORKFLOWS[:1], WORKFLOWS[1:])),
        limit=st.integers(1, 3),
        steer=st.booleans(),
        version=VERSION,
        only=st.booleans(),
    )
    def claim_next(
        self,
        owner: str,
        queue: str,
        workflows: tuple[str, ...],
        limit: int,
        *,
        steer: bool = False,
        version: str | None = None,
        only: bool = False,
    ) -> None:
        """claim_next: the highest priority, then the oldest, queued runs become RUNNING,
        as far as the queue's limits let them (see `Model._choose`); by a claimer of
        *version* (stamped on the runs it starts), maybe claiming *only* runs of it or of
        none. Steered to the declared queue with the most queued runs."""
        if steer and self.model.queues:
            queued = [r.queue for r in self.model.runs.values() if r.status is RunStatus.QUEUED]
            queue = max(sorted(self.model.queues), key=queued.count)
            workflows = WORKFLOWS
        only = only and version is not None
        expected = self.model.claim_next(
            owner, queue, workflows, limit, version=version, only=version if only else None
        )
        self._on_all(
            f"claim_next(owner={owner!r}, queue={queue!r}, workflows={workflows}, limit={limit}, "
            f"version={version!r}, only_version={only})",
            expected,
            lambda b: [
                (run.id, view_run(b, run))
                for run in b.claim_next(
                    owner=owner,
                    queue=queue,
                    workflows=workflows,
                    limit=limit,
                    lease=LEASE,
                    version=version,
                    only_version=only,
                )
            ],
        )

    @rule(
        run_id=runs,
        owner=OWNER,
        shift=SHIFT,
        dead=st.sampled_from(("nobody", "nobody", "the holder", "a stranger")),
        version=VERSION,
        only=st.booleans(),
    )
    def claim_run(
        self,
        run_id: str,
        owner: str,
        shift: int,
        dead: str,
        *,
        version: str | None = None,
        only: bool = False,
    ) -> None:
        """claim_run: a queued, blocked, due, expired or dead-owned run is taken over, if
        its queue's limits admit it (see `Model._admitted`); *version* and *only* as for
        claim_next."""
        epoch = self._epoch(run_id, shift)
        only = only and version is not None
        run = self.model.runs.get(run_id)
        dead_owner = {
            "nobody": None,
            "the holder": run.owner if run is not None else None,
            "a stranger": STRANGER,
        }[dead]
        expected = self.model.claim_run(
            run_id, owner, epoch, dead_owner, version=version, only=version if only else None
        )
        self._on_all(
            f"claim_run({run_id!r}, owner={owner!r}, epoch={epoch}, dead_owner={dead_owner!r}, "
            f"version={version!r}, only_version={only})",
            expected,
            lambda b: view_run(
                b,
                b.claim_run(
                    run_id,
                    owner=owner,
                    lease=LEASE,
                    epoch=epoch,
                    dead_owner=dead_owner,
                    version=version,
                    only_version=only,
                ),
            ),
        )

    @rule(run_id=runs, shift=SHIFT)
    def mark_progress(self, run_id: str, shift: int) -> None:
        """mark_progress: the run's recovery count returns to 0, fenced by epoch."""
        epoch = self._epoch(run_id, shift)
        self.model.mark_progress(run_id, epoch)
        self._on_all(
            f"mark_progress({run_id!r}, {epoch})", None, lambda b: b.mark_progress(run_id, epoch)
        )

    @rule(owner=OWNER)
    def heartbeat(self, owner: str) -> None:
        """renew_leases: every RUNNING run of the owner has a live lease again."""
        expected = self.model.renew_leases(owner, live=True)
        self._on_all(
            f"renew_leases({owner!r}, {LEASE})", expected, lambda b: b.renew_leases(owner, LEASE)
        )

    @rule(owner=OWNER)
    def expire(self, owner: str) -> None:
        """The owner stops heart-beating: its leases run out (recoverable lists them)."""
        expected = self.model.renew_leases(owner, live=False)
        self._on_all(
            f"renew_leases({owner!r}, {EXPIRED}) (expiry)",
            expected,
            lambda b: b.renew_leases(owner, EXPIRED),
        )

    @rule(run_id=runs, shift=SHIFT)
    def release(self, run_id: str, shift: int) -> None:
        """release_run: a RUNNING run is QUEUED again, fenced by epoch."""
        epoch = self._epoch(run_id, shift)
        expected = self.model.release_run(run_id, epoch)
        self._on_all(
            f"release_run({run_id!r}, {epoch})", expected, lambda b: b.release_run(run_id, epoch)
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

    # -- chains and forks -------------------------------------------------------------

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

    # -- history ----------------------------------------------------------------------

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

    def _step(self, run_id: str, position: int, status: StepStatus) -> Step:
        n = next(self.serial)
        quiet = (StepStatus.COMPLETED, StepStatus.WAITING, StepStatus.RUNNING)
        return Step(
            run_id=run_id,
            position=position,
            kind=StepKind.TASK,
            name=f"app.task{position}",
            call_hash=f"v1:{position:02d}",
            status=status,
            input=b"j[%d]" % n,
            output=b"j%d" % n if status is StepStatus.COMPLETED else None,
            error=None if status in quiet else b"je%d" % n,
            attempts=n,
            started_at=float(n),
            finished_at=float(n) if status.finished else None,
            # A RUNNING step with a wake_at is a hung attempt (its heartbeat deadline, in
            # 1970: past), making its run claimable; without one it is not.
            wake_at=None
            if status.finished or (status is StepStatus.RUNNING and n % 2)
            else float(n) + 0.5,
            # Some steps end code that changed the properties: a later write without a
            # snapshot keeps theirs (see `state`).
            state=b'j{"n":%d}' % n if n % 3 == 0 else None,
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

    # -- events -----------------------------------------------------------------------

    @rule(
        run_id=runs,
        name=st.sampled_from(EVENT_NAMES),
        key=st.sampled_from((None, None, "k1", "k2")),
        sender=st.none() | st.just("svc"),
        steer=st.sampled_from((None, "waiting", "chain")),
    )
    def send(
        self,
        run_id: str,
        name: str,
        key: str | None,
        sender: str | None,
        steer: str | None = None,
    ) -> None:
        """send_event: into the inbox, once per key; a run waiting for the name (or for
        any event) is queued; to a CONTINUED run, into its chain's current run's.
        Steered to a WAITING run, or to a CONTINUED one."""
        wanted = RunStatus.CONTINUED if steer == "chain" else RunStatus.WAITING
        run_id = self._steer(run_id, steer is not None, lambda _, run: run.status is wanted)
        payload = b'j"payload %d"' % next(self.serial)
        expected = self.model.send_event(run_id, name, payload, key=key, sender=sender)
        self._on_all(
            f"send_event({run_id!r}, {name!r}, {payload!r}, key={key!r}, sender={sender!r})",
            expected,
            lambda b: view_event(b, b.send_event(run_id, name, payload, key=key, sender=sender)),
        )

    @rule(
        run_id=runs,
        shift=SHIFT,
        name=st.sampled_from(EVENT_NAMES) | st.none(),
        exclude=st.sampled_from((None, *EVENT_NAMES)),
        back=st.integers(0, 1),
        steer=st.booleans(),
    )
    def consume(
        self,
        *,
        run_id: str,
        shift: int,
        name: str | None,
        back: int,
        exclude: str | None = None,
        steer: bool = False,
    ) -> None:
        """consume_event: the oldest unconsumed event of the name, recorded at a position;
        with no name (an on_event handler), the oldest of any name but *exclude*. Steered
        to a run with an unconsumed event."""
        run_id = self._steer(run_id, steer, lambda i, _: self.model.has_events(i, None))
        epoch = self._epoch(run_id, shift)
        position = max(0, self.model.next_position(run_id) - back)
        n = next(self.serial)
        step = Step(
            run_id=run_id,
            position=position,
            kind=StepKind.EVENT if name is not None else StepKind.HANDLER,
            name=name if name is not None else "on_event",
            call_hash=f"v1:event-{name}",
            status=StepStatus.WAITING,
            started_at=float(n),
            finished_at=float(n),
        )
        if name is not None:
            exclude = None
        expected = self.model.consume_event(step, epoch, name, exclude)
        self._on_all(
            f"consume_event({step}, {epoch}, {name!r}, exclude={exclude!r})",
            expected,
            lambda b: _stored(b, b.consume_event(step, epoch, name, exclude=exclude)),
        )

    @rule(run_id=runs, exclude=st.sampled_from((None, *EVENT_NAMES)))
    def has_events(self, run_id: str, exclude: str | None) -> None:
        """has_events: whether an unconsumed event not named *exclude* is in the inbox."""
        expected = self.model.has_events(run_id, exclude)
        self._on_all(
            f"has_events({run_id!r}, exclude={exclude!r})",
            expected,
            lambda b: b.has_events(run_id, exclude=exclude),
        )

    # -- waiting ----------------------------------------------------------------------

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

    @rule(
        call=st.sampled_from(
            (
                "claim_run",
                "mark_progress",
                "release",
                "finish",
                "cancel",
                "pause",
                "resume",
                "park",
                "has_events",
                "record",
                "record_pair",
                "heartbeat",
                "send",
                "consume",
                "suspend",
                "continue",
                "fork",
            )
        )
    )
    def unknown_run(self, call: str) -> None:
        """A call naming a run that does not exist gives the documented answer."""
        fenced = {
            "claim_run": lambda: self.claim_run(
                run_id=GHOST, owner=OWNERS[0], shift=0, dead="nobody"
            ),
            "mark_progress": lambda: self.mark_progress(run_id=GHOST, shift=0),
            "release": lambda: self.release(run_id=GHOST, shift=0),
            "finish": lambda: self.finish(
                run_id=GHOST, shift=0, status=RunStatus.COMPLETED, with_step=True
            ),
            "cancel": lambda: self.cancel(run_id=GHOST),
            "pause": lambda: self.pause(run_id=GHOST),
            "resume": lambda: self.resume(run_id=GHOST, drop="start"),
            "park": lambda: self.park(run_id=GHOST, shift=0),
            "has_events": lambda: self.has_events(run_id=GHOST, exclude=None),
            "record": lambda: self.record(
                run_id=GHOST, shift=0, back=0, status=StepStatus.COMPLETED
            ),
            "record_pair": lambda: self.record_pair(run_id=GHOST, shift=0, back=0),
            "heartbeat": lambda: self.beat(
                run_id=GHOST, shift=0, back=0, attempt_shift=0, details=None
            ),
            "send": lambda: self.send(run_id=GHOST, name="go", key=None, sender=None),
            "consume": lambda: self.consume(run_id=GHOST, shift=0, name="go", back=0),
            "suspend": lambda: self.suspend(
                run_id=GHOST, shift=0, timer="past", waiting="nothing", other=GHOST
            ),
            "continue": lambda: self.continue_run(run_id=GHOST, shift=0, back=0, version=None),
            "fork": lambda: self.fork(
                original=GHOST, new_id=RUN_IDS[0], fresh=True, back=0, version=None
            ),
        }
        fenced[call]()
        self.fenced = True

    # -- the invariants ---------------------------------------------------------------

    @invariant()
    def backends_match_the_model(self) -> None:
        """Every backend shows the model's state; the step kept the invariants."""
        expected = self.model.dump()
        for name, backend in self.backends.by_name.items():
            got = observe(backend)
            if self.fenced and self.previous is not None:
                problems = describe_difference(self.previous, got)
                assert not problems, (
                    f"{name}: a call with a stale epoch changed the state:\n" + "\n".join(problems)
                )
            problems = describe_difference(expected, got)
            assert not problems, f"{name} differs from the model:\n" + "\n".join(problems)
        check_transition(self.previous, expected)
        self.previous = expected
        self.fenced = False


def _created(backend: Backend, result: tuple[Run, bool]) -> object:
    """create_run's and debounce_run's answer, as the model writes it."""
    run, created = result
    if created:
        _apart(backend, run)
    return view_run(backend, run), created


def _apart(backend: Backend, run: Run | None) -> None:
    """After *run* was created: claim_next takes the oldest first, so keep creation
    times apart, even on SQLite, whose clock counts milliseconds."""
    if run is not None:
        while backend.now() <= run.created_at:
            time.sleep(0.001)


def _forked(backend: Backend, run: Run | None) -> object:
    """fork_run's answer, as the model writes it."""
    _apart(backend, run)
    return view_run(backend, run)


def _handed_over(backend: Backend, done: bool, successor: str) -> bool:
    """continue_run's answer; its successor's creation time kept apart."""
    if done:
        _apart(backend, backend.get_run(successor))
    return done


def _stored(backend: Backend, result: tuple[Step, int] | None) -> object:
    """record's and consume_event's answer, as the model writes it."""
    if result is None:
        return None
    step, flags = result  # the run's requests (CANCEL_REQUEST | PAUSE_REQUEST)
    return view_step(backend, step), flags


def _postgres_url() -> str | None:
    if POSTGRES_URL:
        return POSTGRES_URL
    if REQUIRE_POSTGRES:
        pytest.fail("DURABLE_REQUIRE_POSTGRES=1 but DURABLE_TEST_POSTGRES_URL is not set")
    return None


@pytest.fixture
def open_backends(tmp_path: Path) -> Callable[[], Backends]:
    """A factory of fresh backend trios, one per Hypothesis example."""
    url = _postgres_url()
    numbers = itertools.count()
    return lambda: Backends(tmp_path, url, next(numbers))


# Shrinking a failure can take minutes with PostgreSQL (Hypothesis gives up after five).
@pytest.mark.timeout(600)
def test_backends_agree_with_the_model(open_backends: Callable[[], Backends]) -> None:
    """Random sequences of backend operations leave memory, SQLite and PostgreSQL in the
    model's state, every call giving the model's answer, and keep the invariants."""
    # A factory is accepted (documented), though the stubs say "a class".
    run_state_machine_as_test(
        lambda: BackendMachine(open_backends),  # type: ignore[arg-type]
        settings=SETTINGS,
    )


# -- what the machine found, replayed on every backend --------------------------------


def _replay(
    open_backends: Callable[[], Backends], *steps: Callable[[BackendMachine], object]
) -> dict[str, Dump]:
    """Run *steps* on a fresh machine, every backend checked against the model after
    each; return what each backend shows at the end."""
    machine = BackendMachine(open_backends)
    try:
        for step in steps:
            step(machine)
            machine.backends_match_the_model()
        return {name: observe(backend) for name, backend in machine.backends.by_name.items()}
    finally:
        machine.teardown()


def test_cancel_reaches_a_parent_waiting_on_its_queued_child(
    open_backends: Callable[[], Backends],
) -> None:
    """Cancelling a run that waits for its QUEUED child cancels the child and queues the
    parent with its cancel request (SQL used to wake it through the child first, and
    drop the request)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.suspend(run_id="r0", shift=0, timer=None, waiting="its child", other="r0"),
        lambda m: m.cancel(run_id="r0"),
    )
    for name, dump in dumps.items():
        parent, child = dump.runs["r0"], dump.runs["r1"]
        assert parent is not None and child is not None
        assert (parent.status, parent.cancel) == (RunStatus.QUEUED, True), name
        assert child.status is RunStatus.CANCELLED, name


def test_cancel_keeps_a_started_queued_run_queued_with_its_request(
    open_backends: Callable[[], Backends],
) -> None:
    """A run that has started and is queued again (here: its timer was woken) is not
    cancelled on the spot, twice over: it stays queued with the request, so its code
    sees Cancelled and its finally blocks run. A never-started sibling is cancelled."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.suspend(run_id="r0", shift=0, timer="past", waiting="nothing", other="r0"),
        lambda m: m.wake_due(limit=3),
        lambda m: m.cancel(run_id="r0"),
        lambda m: m.cancel(run_id="r0"),
    )
    for name, dump in dumps.items():
        parent, child = dump.runs["r0"], dump.runs["r1"]
        assert parent is not None and child is not None
        assert (parent.status, parent.cancel) == (RunStatus.QUEUED, True), name
        assert child.status is RunStatus.CANCELLED, name


def test_recording_over_a_retrying_step_keeps_its_first_start(
    open_backends: Callable[[], Backends],
) -> None:
    """A position written over (it was RETRYING) keeps the started_at of its first write
    on every backend (the memory backend used to take the new one)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.record(run_id="r1", shift=0, back=0, status=StepStatus.RETRYING),
        lambda m: m.record(run_id="r1", shift=0, back=1, status=StepStatus.COMPLETED),
    )
    for name, dump in dumps.items():
        (step,) = dump.history["r1"]
        assert (step.status, step.attempts, step.started_at) == (StepStatus.COMPLETED, 2, 1.0), name


def test_create_returns_the_stored_parent_and_priority(
    open_backends: Callable[[], Backends],
) -> None:
    """A known id comes back with its stored parent (none, here) and its int4-limit
    priority, though the second create names a parent and another priority."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2=None, queue="default", priority=PRIORITY_MAX
        ),
        lambda m: m.create(
            run_id="r2",
            owner=None,
            queue="default",
            priority=PRIORITY_MIN,
            workflow="wf.a",
            same_call=True,
            parent="r0",
        ),
        lambda m: m.claim_next(owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=3),
    )
    for name, dump in dumps.items():
        r1, r2 = dump.runs["r1"], dump.runs["r2"]
        assert r1 is not None and r2 is not None
        assert (r2.parent, r2.priority) == (None, 0), name
        assert (r1.parent, r1.priority, r1.status) == ("r0", PRIORITY_MAX, RunStatus.RUNNING), name


def test_a_pair_over_a_finished_position_is_recorded_step_by_step(
    open_backends: Callable[[], Backends],
) -> None:
    """record_steps where the start's position is already finished: nothing of the pair
    is written in one go; each step is then recorded alone, and the answers are what
    `record` gives (SQL used to write the result first and read it back as found)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2="r0", queue="default", priority=0
        ),
        lambda m: m.record(run_id="r2", shift=0, back=0, status=StepStatus.RETRYING),
        lambda m: m.record(run_id="r2", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.record_pair(run_id="r2", shift=0, back=2),
    )
    for name, dump in dumps.items():
        first, second = dump.history["r2"]
        assert (first.status, first.input, first.started_at) == (
            StepStatus.COMPLETED, b"j[3]", 1.0,
        ), name  # fmt: skip
        assert (second.status, second.input) == (StepStatus.COMPLETED, b"j[2]"), name


def test_a_reopened_run_gets_back_the_events_of_the_positions_it_drops(
    open_backends: Callable[[], Backends],
) -> None:
    """resume_run(drop_from=) on a CANCELLED run: the steps from there on are deleted,
    the event one of them consumed is unconsumed again, and the run is queued with no
    outcome (a chain the machine seldom builds by chance: pinned here)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.send(run_id="r0", name="go", key=None, sender=None),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.consume(run_id="r0", shift=0, name=None, back=0, exclude="stop"),
        lambda m: m.finish(run_id="r0", shift=0, status=RunStatus.CANCELLED, with_step=True),
        lambda m: m.resume(run_id="r0", drop="an event"),
    )
    for name, dump in dumps.items():
        run, (event,) = dump.runs["r0"], dump.events["r0"]
        assert run is not None, name
        assert (run.status, run.error, run.cancel) == (RunStatus.QUEUED, None, False), name
        assert [s.position for s in dump.history["r0"]] == [0], name
        assert event.consumed_position is None, name


def test_pause_park_and_resume_a_tree(open_backends: Callable[[], Backends]) -> None:
    """pause_run over a tree: a running root is asked (its writes answer PAUSE_REQUEST,
    checked by the machine), a queued and a waiting child are PAUSED at once, the
    waiting one keeping its wait, which no event ends; park_run stops the root; and
    resume_run queues them all."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, OWNERS[1]), parent_of_r2="r0", queue="default", priority=0
        ),
        lambda m: m.suspend(
            run_id="r2", shift=0, timer="later", waiting="events|event:go", other="r2"
        ),
        lambda m: m.pause(run_id="r0"),
        lambda m: m.send(run_id="r2", name="stop", key=None, sender=None),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.park(run_id="r0", shift=0),
    )
    for name, dump in dumps.items():
        r0, r1, r2 = (dump.runs[r] for r in ("r0", "r1", "r2"))
        assert r0 is not None and r1 is not None and r2 is not None
        assert (r0.status, r0.pause, r0.owner) == (RunStatus.PAUSED, False, None), name
        assert r1.status is RunStatus.PAUSED, name
        assert (r2.status, r2.wake, r2.waiting_on) == (
            RunStatus.PAUSED, "later", "events|event:go",
        ), name  # fmt: skip
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, OWNERS[1]), parent_of_r2="r0", queue="default", priority=0
        ),
        lambda m: m.suspend(
            run_id="r2", shift=0, timer="later", waiting="events|event:go", other="r2"
        ),
        lambda m: m.pause(run_id="r0"),
        lambda m: m.park(run_id="r0", shift=0),
        lambda m: m.resume(run_id="r0", drop=None),
    )
    for name, dump in dumps.items():
        for run_id in ("r0", "r1", "r2"):
            run = dump.runs[run_id]
            assert run is not None and run.status is RunStatus.QUEUED, (name, run_id)
            assert (run.wake, run.waiting_on, run.pause) == (None, None, False), (name, run_id)


def test_any_event_waits_end_on_any_event_and_on_the_child(
    open_backends: Callable[[], Backends],
) -> None:
    """A run waiting ``events|event:go`` is queued by an event of another name; one
    waiting ``events|run:<child>`` by its child finishing."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, OWNERS[1]), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.suspend(
            run_id="r2", shift=0, timer=None, waiting="events|event:go", other="r2"
        ),
        lambda m: m.send(run_id="r2", name="stop", key=None, sender=None),
        lambda m: m.suspend(
            run_id="r0", shift=0, timer="later", waiting="events|its child", other="r0"
        ),
        lambda m: m.finish(run_id="r1", shift=0, status=RunStatus.COMPLETED, with_step=False),
        lambda m: m.has_events(run_id="r2", exclude="stop"),
        lambda m: m.has_events(run_id="r2", exclude=None),
    )
    for name, dump in dumps.items():
        r0, r2 = dump.runs["r0"], dump.runs["r2"]
        assert r0 is not None and r2 is not None
        assert (r0.status, r2.status) == (RunStatus.QUEUED, RunStatus.QUEUED), name


def test_queue_limits_key_limits_and_a_rate_in_the_claim(
    open_backends: Callable[[], Backends],
) -> None:
    """A queue of two slots, one run per key and two first starts an hour: a claim
    passes over the second run of a key, takes two first starts and stops; a full queue
    claims nothing; a freed slot is not a new start; a rate raised lets one more in."""
    dumps = _replay(
        open_backends,
        lambda m: m.limits(declare=True, concurrency=2, key_concurrency=1, rate=2),
        lambda m: m.family(
            owners=(None, None, None),
            parent_of_r2=None,
            queue="default",
            priority=0,
            keys=("k1", "k1", None),
        ),
        lambda m: m.burst(queue="default", plan=[("k2", None, 0), (None, None, 0)] * 3),
        lambda m: m.claim_next(owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=3),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=3),
        lambda m: m.finish(run_id="r0", shift=0, status=RunStatus.COMPLETED, with_step=False),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=3),
        lambda m: m.declare("default", 2, 1, 3),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=3),
    )
    for name, dump in dumps.items():
        status = {run_id: run.status for run_id, run in dump.runs.items() if run is not None}
        running = sorted(run_id for run_id, s in status.items() if s is RunStatus.RUNNING)
        assert running == ["r1", "r2"], (name, status)
        assert dump.next_start["default"] == "later", name


def test_a_key_rate_in_the_claim(open_backends: Callable[[], Backends]) -> None:
    """One first start per key an hour: a claim takes the first run of each key and
    the runs without one; a finished run's start still counts; a key rate raised lets
    one more run of each key in."""
    dumps = _replay(
        open_backends,
        lambda m: m.limits(
            declare=True, concurrency=None, key_concurrency=None, rate=None, key_rate=1
        ),
        lambda m: m.family(
            owners=(None, None, None),
            parent_of_r2=None,
            queue="default",
            priority=0,
            keys=("k1", "k1", None),
        ),
        lambda m: m.burst(queue="default", plan=[("k2", None, 0)] * 3),
        lambda m: m.claim_next(owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=9),
        lambda m: _running(m, ["r0", "r2", "r3"]),  # (each step: every backend as the model)
        lambda m: m.finish(run_id="r0", shift=0, status=RunStatus.COMPLETED, with_step=False),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=9),
        lambda m: _running(m, ["r2", "r3"]),
        lambda m: m.declare("default", None, None, None, 2),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=9),
    )
    for name, dump in dumps.items():
        status = {run_id: run.status for run_id, run in dump.runs.items() if run is not None}
        running = sorted(run_id for run_id, s in status.items() if s is RunStatus.RUNNING)
        assert running == ["r1", "r2", "r3", "r4"], (name, status)


def test_a_refused_hand_over_records_nothing(open_backends: Callable[[], Backends]) -> None:
    """continue_run of a child, with a last step: False, and the step is not recorded
    (SQL used to record it before it found the run refused); of a top-level run with a
    last step over a finished position: the hand-over is made, the position keeps its
    step (SQL used to refuse it)."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2="r0", queue="default", priority=0
        ),
        lambda m: m.continue_run(run_id="r2", shift=0, back=0, version=None),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.continue_run(run_id="r0", shift=0, back=1, version=None),
    )
    for name, dump in dumps.items():
        r0, r2 = dump.runs["r0"], dump.runs["r2"]
        assert r2 is not None and r2.status is RunStatus.QUEUED, name
        assert dump.history["r2"] == () and dump.runs["r2~1"] is None, name
        assert r0 is not None and r0.status is RunStatus.CONTINUED, name
        assert [s.input for s in dump.history["r0"]] == [b"j[3]"], name  # record's, kept


def test_a_chain_carries_events_children_and_requests(
    open_backends: Callable[[], Backends],
) -> None:
    """r0 asked to pause hands over twice: its unconsumed event, its unfinished child
    and the request go to r0~1, then on to r0~2; an event sent to r0 follows the chain
    (its key, seen on the way, sends nothing twice). A successor id taken first is an
    IdempotencyConflict."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(OWNERS[0], None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.send(run_id="r0", name="go", key=None, sender=None),
        lambda m: m.consume(run_id="r0", shift=0, name="go", back=0),
        lambda m: m.send(run_id="r0", name="stop", key="k1", sender=None),
        lambda m: m.pause(run_id="r0"),
        lambda m: m.continue_run(run_id="r0", shift=0, back=0, version="v1"),
        lambda m: m.continue_run(run_id="r0~1", shift=0, back=None, version=None),
        lambda m: m.send(run_id="r0", name="go", key="k2", sender="svc"),
        lambda m: m.send(run_id="r0", name="go", key="k1", sender="svc"),
        lambda m: m.create(
            run_id=TAKEN,
            owner=None,
            queue="default",
            priority=0,
            workflow="wf.a",
            same_call=True,
            parent=None,
        ),
        lambda m: m.continue_run(run_id="r2", shift=0, back=0, version=None),
    )
    for name, dump in dumps.items():
        r0, first, last, r1 = (dump.runs[i] for i in ("r0", "r0~1", "r0~2", "r1"))
        assert r0 is not None and first is not None and last is not None and r1 is not None
        assert (r0.status, first.status, first.version) == (
            RunStatus.CONTINUED, RunStatus.CONTINUED, "v1",
        ), name  # fmt: skip
        assert (last.status, last.pause, r1.parent) == (RunStatus.QUEUED, True, "r0~2"), name
        assert [e.consumed_position for e in dump.events["r0"]] == [0], name
        assert [(e.name, e.key) for e in dump.events["r0~2"]] == [
            ("stop", "k1"), ("go", "k2"),
        ], name  # fmt: skip
        r2 = dump.runs["r2"]
        assert r2 is not None and r2.status is RunStatus.QUEUED, name


def test_a_fork_copies_the_finished_steps(open_backends: Callable[[], Backends]) -> None:
    """fork_run copies the finished steps below *before*, skipping a RUNNING one (the
    fork's history has a gap), as a queued run with its origin and version; a second
    fork under the same id writes nothing."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2=None, queue="default", priority=0
        ),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.RUNNING),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.FAILED),
        lambda m: m.record(run_id="r0", shift=0, back=0, status=StepStatus.COMPLETED),
        lambda m: m.fork(original="r0", new_id=FORK, fresh=False, back=1, version="v2"),
        lambda m: m.fork(original="r1", new_id=FORK, fresh=False, back=0, version=None),
    )
    for name, dump in dumps.items():
        fork = dump.runs[FORK]
        assert fork is not None, name
        assert (fork.status, fork.origin, fork.version) == (RunStatus.QUEUED, "r0", "v2"), name
        assert [s.position for s in dump.history[FORK]] == [0, 2], name


def test_only_version_claims(open_backends: Callable[[], Backends]) -> None:
    """A claimer serving only v1 takes runs of v1 or of no version (stamping these)
    and passes over a v2 run; a claimer of any version takes it, and stamps its own."""

    def create(run_id: str, version: str) -> Callable[[BackendMachine], object]:
        return lambda m: m.create(
            run_id=run_id,
            owner=None,
            queue="default",
            priority=0,
            workflow="wf.a",
            same_call=True,
            parent=None,
            version=version,
        )

    dumps = _replay(
        open_backends,
        lambda m: m.family(owners=(None, None, None), parent_of_r2=None, queue="mail", priority=0),
        create("r3", "v2"),
        create("r4", "v1"),
        lambda m: m.claim_next(
            owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=3, version="v1", only=True
        ),
        lambda m: m.claim_run(
            run_id="r3", owner=OWNERS[0], shift=0, dead="nobody", version="v1", only=True
        ),
        lambda m: _running(m, ["r0", "r2", "r4"]),
        lambda m: m.claim_run(run_id="r3", owner=OWNERS[1], shift=0, dead="nobody", version="v1"),
    )
    for name, dump in dumps.items():
        versions = {i: (r.status, r.version) for i, r in dump.runs.items() if r is not None}
        running = (RunStatus.RUNNING, "v1")
        assert versions == {
            "r0": running, "r1": (RunStatus.QUEUED, None), "r2": running, "r3": running,
            "r4": running,
        }, name  # fmt: skip


def _running(machine: BackendMachine, expected: list[str]) -> None:
    model = machine.model.runs
    assert sorted(i for i, run in model.items() if run.status is RunStatus.RUNNING) == expected


# -- differences the machine found between memory and SQL, fixed -----------------------


def _new(run_id: str, **fields: object) -> NewRun:
    return NewRun(
        id=run_id, workflow="wf.a", input=b"j[1]", call_hash="v1:1", owner=None, lease=LEASE,
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def _claim(backend: Backend) -> list[str]:
    claimed = backend.claim_next(
        owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=3, lease=LEASE
    )
    return [run.id for run in claimed]


def _lowered_rate(backend: Backend) -> object:
    """Three starts under a rate of 3; the rate lowered to 1; a claim that starts
    nothing; the rate raised to 3 again: the hour holds three starts, so none may
    start. Memory's claim used to trim the log to the lowered rate even when it started
    nothing; the log is written only when a run starts."""
    backend.put_queue(Queue(name="default", rate=3, per=PER))
    for run_id in RUN_IDS[:4]:
        _created(backend, backend.create_run(_new(run_id)))
    first = _claim(backend)
    backend.put_queue(Queue(name="default", rate=1, per=PER))
    _claim(backend)
    backend.put_queue(Queue(name="default", rate=3, per=PER))
    return first, _claim(backend)


def _coalesced_key_limit(backend: Backend) -> object:
    """A debounced run coalesced with a key limit of its own gives its queue a row
    (claims then enforce the limit); memory used to only when the call created the run,
    and with one run of the key running its claim took the run past its limit of 1."""
    backend.debounce_run(_new("r0", key="k1"), window=FAR, longest=2 * FAR)
    backend.create_run(dataclasses.replace(_new("r1", key="k1"), owner=OWNERS[1]))
    backend.debounce_run(_new("r2", key="k1", key_limit=1), window=FAR, longest=2 * FAR)
    backend.cancel_run("r0")  # queued (with the request), never started
    return backend.get_queue("default"), _claim(backend)


def _known_id_with_a_key_limit(backend: Backend) -> object:
    """create_run of a known id returns the stored run; the named queue gets its row
    when the call carries a key limit, as SQL writes it before it finds the id taken."""
    backend.create_run(_new("r0"))
    backend.create_run(_new("r0", queue="mail", key="k1", key_limit=1))
    return list(backend.list_queues())


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (_lowered_rate, (["r0", "r1", "r2"], [])),
        (_coalesced_key_limit, (Queue(name="default"), [])),
        (_known_id_with_a_key_limit, [Queue(name="mail")]),
    ],
)
def test_flow_control_agrees(
    open_backends: Callable[[], Backends], scenario: Callable[[Backend], object], expected: object
) -> None:
    """Each backend gives *expected* (SQL's answer) at the end of *scenario*."""
    backends = open_backends()
    try:
        answers = {name: scenario(backend) for name, backend in backends.by_name.items()}
    finally:
        backends.close()
    assert all(got == expected for got in answers.values()), answers
