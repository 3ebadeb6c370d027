"""The Backend contracts of queue limits (`QueueStore`, and the claims that respect
them), as executable checks (see `_conformance.py`).

A limit holds against claimers racing on threads (each with its own connection on a
SQL backend), a dead worker's slot is free once its lease expires, a key's limit and a
rate's window hold, and a run claimed on its own (`claim_run`) is admitted by the
same rules.
"""

from __future__ import annotations

import dataclasses
import time

from durable.backends import Backend
from durable.core.queues import Queue
from durable.core.records import NewRun, RunStatus

from ._conformance import (
    OTHER,
    OWNER,
    SHORT_LEASE,
    MakeBackend,
    _expire,
    _get,
    _opened,
    _queued,
    _race,
)


def _run(run_id: str, queue: str = "q", **fields: object) -> NewRun:
    return dataclasses.replace(_queued(run_id, queue=queue), **fields)  # type: ignore[arg-type]


def _claim(
    backend: Backend, limit: int = 10, *, lease: float = 30.0, owner: str = OWNER
) -> list[str]:
    claimed = backend.claim_next(
        owner=owner, queue="q", workflows=["app.workflow"], limit=limit, lease=lease
    )
    return [run.id for run in claimed]


def check_queue_round_trip(make: MakeBackend) -> None:
    """put_queue stores a queue's limits and replaces them; get_queue and list_queues
    read them back; a queue that declared nothing is None."""
    with _opened(make) as backend:
        assert backend.get_queue("q") is None and list(backend.list_queues()) == []
        first = Queue(
            name="q", concurrency=3, key_concurrency=1, rate=10, per=1.5, key_rate=2,
            key_per=0.25,
        )  # fmt: skip
        assert backend.put_queue(first) == first and backend.get_queue("q") == first
        second = Queue(name="q", rate=5, per=60.0)
        backend.put_queue(second)
        backend.put_queue(Queue(name="a", concurrency=1))
        assert backend.get_queue("q") == second
        assert [queue.name for queue in backend.list_queues()] == ["a", "q"]
        assert backend.next_start("a") is None and backend.next_start("q") == 0.0


def check_concurrency_holds_across_racing_claimers(make: MakeBackend) -> None:
    """At most ``concurrency`` runs of a queue RUNNING, however many claim at once;
    the runs of other queues are not held back; a finished run frees its slot."""
    with _opened(make) as backend:
        backend.put_queue(Queue(name="q", concurrency=3))
        for i in range(12):
            backend.create_run(_run(f"r{i:02d}"))
        backend.create_run(_run("free", queue="other"))
        got = _race(4, lambda i: _claim(backend, 2, owner=f"{OWNER}-{i}"))
        claimed = [run_id for batch in got for run_id in batch]
        assert len(claimed) == 3 == len(set(claimed)), f"limit 3, claimed {claimed}"
        assert _claim(backend) == [], "the queue is full"
        other = backend.claim_next(
            owner=OWNER, queue="other", workflows=["app.workflow"], limit=5, lease=30
        )
        assert [run.id for run in other] == ["free"], "another queue is not held back"
        done = _get(backend, claimed[0])
        assert backend.finish_run(done.id, done.epoch, RunStatus.COMPLETED, output=b"j1")
        assert len(_claim(backend)) == 1, "a finished run frees its slot"


def check_a_lowered_limit_claims_nothing_until_below_it(make: MakeBackend) -> None:
    """A limit lowered below the runs already RUNNING lets no claim through (never
    "no limit", as a negative LIMIT reads on SQLite) until enough of them finish."""
    with _opened(make) as backend:
        backend.put_queue(Queue(name="q", concurrency=3))
        for i in range(6):
            backend.create_run(_run(f"r{i}"))
        running = _claim(backend)
        assert len(running) == 3
        backend.put_queue(Queue(name="q", concurrency=1))
        for finished in range(3):
            assert _claim(backend) == [], f"3 running less {finished} finished, limit 1"
            done = _get(backend, running[finished])
            backend.finish_run(done.id, done.epoch, RunStatus.COMPLETED, output=b"j1")
        assert len(_claim(backend)) == 1, "nothing running: one slot"


def check_a_dead_workers_slot_frees_when_its_lease_expires(make: MakeBackend) -> None:
    """A RUNNING run whose lease expired holds no slot; taking it over (claim_run)
    needs a free slot like any claim."""
    with _opened(make) as backend:
        backend.put_queue(Queue(name="q", concurrency=1))
        backend.create_run(_run("dead"))
        backend.create_run(_run("next"))
        assert _claim(backend, lease=SHORT_LEASE) == ["dead"]
        assert _claim(backend) == [], "the slot is held while the lease lives"
        _expire()
        assert _claim(backend) == ["next"], "an expired lease frees the slot"
        orphan = _get(backend, "dead")
        taken = backend.claim_run("dead", owner=OTHER, lease=30, epoch=orphan.epoch)
        assert taken is None, "the takeover must wait for a slot"
        running = _get(backend, "next")
        backend.finish_run("next", running.epoch, RunStatus.COMPLETED, output=b"j1")
        taken = backend.claim_run("dead", owner=OTHER, lease=30, epoch=orphan.epoch)
        assert taken is not None and taken.lease_owner == OTHER and taken.recoveries == 1


def check_key_limits(make: MakeBackend) -> None:
    """Runs sharing a key run at most their limit at once (the run's own, else the
    queue's ``key_concurrency``); runs behind a held-back key go ahead; a run with its
    own key limit makes its queue's claims enforce it even if the queue declared nothing."""
    with _opened(make) as backend:
        for i in range(3):
            backend.create_run(_run(f"a{i}", key="a", key_limit=1, priority=10))
        for i in range(3):
            backend.create_run(_run(f"b{i}", key="b", key_limit=2, priority=5))
        backend.create_run(_run("plain"))
        assert backend.get_queue("q") == Queue(name="q"), "a key limit gives its queue a row"
        assert _get(backend, "a0").key == "a" and _get(backend, "a0").key_limit == 1
        first = _race(3, lambda i: _claim(backend, 2, owner=f"{OWNER}-{i}"))
        claimed = sorted(run_id for batch in first for run_id in batch)
        assert claimed == ["a0", "b0", "b1", "plain"], claimed
        backend.put_queue(Queue(name="q", key_concurrency=1))
        backend.create_run(_run("c0", key="c"))
        backend.create_run(_run("c1", key="c"))
        assert _claim(backend) == ["c0"], "the queue's key_concurrency for runs without their own"
        usage = {u.name: u for u in backend.queue_usage()}["q"]
        assert (usage.queued, usage.running) == (4, 5) and usage.keys == {"a": 1, "b": 2, "c": 1}


def check_key_limits_hold_across_racing_claimers(make: MakeBackend) -> None:
    """Round after round of claimers racing, the runs of a round finished before the
    next: each key's one slot goes to one claimer, never two (on PostgreSQL a claim
    that is one statement of its own must see the claims committed after it started)."""
    with _opened(make) as backend:
        backend.put_queue(Queue(name="q", key_concurrency=1))
        ids = [f"r{i:02d}" for i in range(24)]
        for i, run_id in enumerate(ids):
            backend.create_run(_run(run_id, key=f"k{i % 4}"))
        for round_ in range(6):
            got = _race(4, lambda i: _claim(backend, 3, owner=f"{OWNER}-{i}"))
            claimed = sorted(run_id for batch in got for run_id in batch)
            running = [
                run
                for run in (_get(backend, run_id) for run_id in ids)
                if run.status is RunStatus.RUNNING
            ]
            keys = sorted(str(run.key) for run in running)
            assert keys == ["k0", "k1", "k2", "k3"], f"round {round_}: {claimed}, keys {keys}"
            for run in running:
                assert backend.finish_run(run.id, run.epoch, RunStatus.COMPLETED, output=b"j1")
        assert _claim(backend) == []


def check_rate_window(make: MakeBackend) -> None:
    """No more first starts in any window of ``per`` seconds than the rate allows;
    next_start says when the window lets the next one start; a resumed run is no start."""
    with _opened(make) as backend:
        per = 0.6
        backend.put_queue(Queue(name="q", rate=2, per=per))
        for i in range(5):
            backend.create_run(_run(f"r{i}"))
        started = time.monotonic()
        assert sorted(_race(3, lambda i: len(_claim(backend, 2, owner=f"{OWNER}-{i}")))) == [
            0,
            0,
            2,
        ]
        assert _claim(backend) == [], "two starts fill the window"
        wait = backend.next_start("q")
        assert wait is not None and 0 < wait <= per, wait
        time.sleep(max(0.0, per - (time.monotonic() - started)) + 0.05)
        assert len(_claim(backend)) == 2, "the window moved on"
        # a run that waited and is queued again starts without a new start's token
        first = backend.claim_next(
            owner=OWNER, queue="q", workflows=["app.workflow"], limit=1, lease=30
        )
        assert first == []
        resumed = _get(backend, "r0")
        assert backend.release_run("r0", resumed.epoch)
        assert _claim(backend) == ["r0"], "a resumed run needs no start from the rate"


def check_key_rate_window(make: MakeBackend) -> None:
    """No more first starts of one key in any window of ``key_per`` seconds than the key
    rate allows, across racing claimers; other keys and unkeyed runs are not held back;
    a run claimed on its own (claim_run) obeys it too; a resumed run is no start."""
    with _opened(make) as backend:
        per = 1.5  # long enough that the checks before the sleep fall inside the window
        backend.put_queue(Queue(name="q", key_rate=2, key_per=per))
        for i in range(6):
            backend.create_run(_run(f"a{i}", key="a"))
        backend.create_run(_run("b0", key="b"))
        backend.create_run(_run("plain"))
        started = time.monotonic()
        got = _race(3, lambda i: _claim(backend, 3, owner=f"{OWNER}-{i}"))
        claimed = sorted(run_id for batch in got for run_id in batch)
        assert claimed == ["a0", "a1", "b0", "plain"], claimed
        assert _claim(backend) == [], "key a used its two starts in the window"
        epoch = _get(backend, "a2").epoch
        refused = backend.claim_run("a2", owner=OWNER, lease=30, epoch=epoch)
        assert refused is None, "claim_run obeys the key rate too"
        time.sleep(max(0.0, per - (time.monotonic() - started)) + 0.05)
        assert sorted(_claim(backend)) == ["a2", "a3"], "the window moved on"
        resumed = _get(backend, "a0")
        assert backend.release_run("a0", resumed.epoch)
        assert _claim(backend) == ["a0"], "a resumed run needs no start from the key rate"


def check_debounce_coalesces_a_burst(make: MakeBackend) -> None:
    """debounce_run: racing dispatches of one workflow and key make one WAITING run
    holding one of their inputs; a later one replaces the input and pushes the start,
    never past ``longest``; once the run has started, the next dispatch makes a new run."""
    with _opened(make) as backend:

        def burst(i: int) -> tuple[str, bool]:
            new = _run(f"d{i:02d}", key="k", input=b"j%d" % i, call_hash=f"v1:{i:02d}")
            run, created = backend.debounce_run(new, window=30.0, longest=60.0)
            return run.id, created

        results = _race(8, burst)
        ids = {run_id for run_id, _ in results}
        assert len(ids) == 1 and sum(created for _, created in results) == 1, results
        (run_id,) = ids
        run = _get(backend, run_id)
        assert run.status is RunStatus.WAITING and run.started_at is None and run.key == "k"
        assert run.input in {b"j%d" % i for i in range(8)}
        first_wake = run.wake_at
        assert first_wake is not None and run.created_at + 29 < first_wake <= run.created_at + 31
        time.sleep(0.05)
        last, created = backend.debounce_run(
            _run("late", key="k", input=b"jlast", call_hash="v1:99"), window=30.0, longest=30.02
        )
        assert (last.id, created) == (run_id, False)
        assert last.input == b"jlast" and last.call_hash == "v1:99"
        assert last.wake_at == _get(backend, run_id).wake_at
        assert last.wake_at is not None
        assert abs(last.wake_at - (run.created_at + 30.02)) < 1e-6, "capped by longest"
        other, created = backend.debounce_run(
            _run("other", key="k2", input=b"j0"), window=30.0, longest=60.0
        )
        assert created and other.id == "other", "another key has its own run"
        # no longer pending (here: cancelled): the next dispatch of its key makes a new run
        assert backend.claim_run(run_id, owner=OWNER, lease=30, epoch=0) is None, "not due"
        assert backend.cancel_run(run_id) is not None
        fresh, created = backend.debounce_run(
            _run("fresh", key="k", input=b"jnew"), window=SHORT_LEASE, longest=1.0
        )
        assert created and fresh.id == "fresh" and fresh.input == b"jnew"
