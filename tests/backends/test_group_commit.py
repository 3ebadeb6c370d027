"""Group commit: concurrent writes share transactions without losing their own results."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable.backends import Backend, _group
from durable.backends._group import GroupCommit, Write
from durable.backends._rows import step_params
from durable.backends._statements.history import ABORTED
from durable.backends.sql import SQLBackend
from durable.core.records import NewRun, RunStatus, Step, StepKind, StepStatus
from durable.errors import LeaseLost, StorageError

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def step(run_id: str, position: int, **fields: Any) -> Step:
    values: dict[str, Any] = {
        "run_id": run_id,
        "position": position,
        "kind": StepKind.TASK,
        "name": "app.task",
        "call_hash": "v1:00",
        "status": StepStatus.COMPLETED,
        "output": b"j%d" % position,
        "epoch": 1,
    }
    values.update(fields)
    return Step(**values)


def in_threads(n: int, work: Callable[[int], Any]) -> list[Any]:
    """Run work(0..n-1) in n threads released together; return results (or errors)."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def target(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as error:
            results[i] = error

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.fixture
def batch_sizes(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """Counts the size of every batch group commit writes."""
    sizes: Counter[int] = Counter()
    original = GroupCommit.__init__

    def counting(self: GroupCommit, write_batch: Callable[[list[Write]], None]) -> None:
        def counted(batch: list[Write]) -> None:
            sizes[len(batch)] += 1
            write_batch(batch)

        original(self, counted)

    monkeypatch.setattr(GroupCommit, "__init__", counting)
    return sizes


@pytest.mark.parametrize("make_backend", SQL, indirect=True)
def test_concurrent_steps_all_land_and_share_transactions(
    make_backend: Callable[[], Backend], batch_sizes: Counter[int]
) -> None:
    """24 threads recording 40 steps each: every step stored once, correctly, in batches."""
    backend = make_backend()
    for i in range(24):
        backend.create_run(
            NewRun(id=f"r{i}", workflow="w", input=b"j[]", call_hash="h", owner="o", lease=60)
        )
    results = in_threads(24, lambda i: [backend.record(step(f"r{i}", p), 1) for p in range(40)])
    for i, recorded in enumerate(results):
        assert not isinstance(recorded, BaseException), recorded
        assert [stored.position for stored, _ in recorded] == list(range(40))
        history = backend.load_history(f"r{i}")
        assert [s.output for s in history] == [b"j%d" % p for p in range(40)]
    writes = sum(size * count for size, count in batch_sizes.items())
    assert writes >= 24 * 40 + 24  # the steps, and the runs created first
    assert max(batch_sizes) > 1, "concurrent writes must have shared a transaction"


@pytest.mark.parametrize("make_backend", SQL, indirect=True)
def test_one_bad_write_does_not_fail_its_batch(make_backend: Callable[[], Backend]) -> None:
    """A write the database refuses fails alone; the others in its batch are stored."""
    backend = make_backend()
    for i in range(12):
        backend.create_run(
            NewRun(id=f"r{i}", workflow="w", input=b"j[]", call_hash="h", owner="o", lease=60)
        )

    def work(i: int) -> Any:
        bad = i == 5
        # name=None breaks a NOT NULL constraint: the database refuses that row.
        return backend.record(step(f"r{i}", 0, name=None if bad else "app.task"), 1)

    results = in_threads(12, work)
    assert isinstance(results[5], StorageError)
    for i, result in enumerate(results):
        if i != 5:
            assert not isinstance(result, BaseException), result
            assert [s.position for s in backend.load_history(f"r{i}")] == [0]
    assert list(backend.load_history("r5")) == []


@pytest.mark.parametrize("make_backend", SQL, indirect=True)
def test_fencing_holds_inside_a_batch(make_backend: Callable[[], Backend]) -> None:
    """Stale writers batched with current ones are fenced off; the current ones land."""
    backend = make_backend()
    for i in range(10):
        backend.create_run(
            NewRun(id=f"r{i}", workflow="w", input=b"j[]", call_hash="h", owner="o", lease=60)
        )
    results = in_threads(10, lambda i: backend.record(step(f"r{i}", 0), 1 if i % 2 else 7))
    for i, result in enumerate(results):
        if i % 2:
            assert not isinstance(result, BaseException)
        else:
            assert isinstance(result, LeaseLost) and result.epoch == 7
    outcomes = in_threads(
        10,
        lambda i: backend.finish_run(f"r{i}", 1 if i < 5 else 3, RunStatus.COMPLETED, output=b"j1"),
    )
    assert outcomes == [True] * 5 + [False] * 5


def test_leadership_passes_on_when_the_queue_is_long() -> None:
    """More writes than one batch holds: every writer still gets its own result."""
    batches: list[int] = []

    def write_batch(batch: list[Write]) -> None:
        batches.append(len(batch))
        for write in batch:
            write.finish([(write.params[0] * 2,)])

    group = GroupCommit(write_batch)
    results = in_threads(200, lambda i: group.write("sql", (i,)))
    assert [rows for rows, _ in results] == [[(i * 2,)] for i in range(200)]
    assert sum(batches) == 200 and max(batches) <= _group.LIMIT


def within(seconds: float, work: Callable[[], Any]) -> Any:
    """work() in a thread; its result, or a failure (not a hang) if it takes too long."""
    results: list[Any] = []

    def target() -> None:
        try:
            results.append(work())
        except BaseException as error:
            results.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert results, f"still waiting after {seconds} s: the group lost its leader"
    if isinstance(results[0], BaseException):
        raise results[0]
    return results[0]


def test_a_lone_writer_writes_at_once() -> None:
    """One write at a time: each is its own batch, and nobody is left leading."""
    batches: list[list[Any]] = []

    def write_batch(batch: list[Write]) -> None:
        batches.append([write.params[0] for write in batch])
        for write in batch:
            write.finish([(write.params[0],)])

    group = GroupCommit(write_batch)
    for i in range(3):
        assert within(10, lambda i=i: group.write("sql", (i,))) == ([(i,)], False)
    assert batches == [[0], [1], [2]]
    assert not group._leading and not group._queue


def test_writers_arriving_during_a_lone_write_share_the_next_batch() -> None:
    """The lone writer hands the lead to the first writer that queued behind it, which
    writes everything queued as one batch."""
    batches: list[list[Any]] = []
    started, queued = threading.Event(), threading.Event()

    def write_batch(batch: list[Write]) -> None:
        batches.append([write.params[0] for write in batch])
        if batch[0].params[0] == "first":
            started.set()
            assert queued.wait(10)
        for write in batch:
            write.finish([(write.params[0],)])

    group = GroupCommit(write_batch)
    first = threading.Thread(target=group.write, args=("sql", ("first",)), daemon=True)
    first.start()
    assert started.wait(10)
    results: list[Any] = [None] * 5

    def later(i: int) -> None:
        results[i] = group.write("sql", (i,))[0]

    threads = [threading.Thread(target=later, args=(i,), daemon=True) for i in range(5)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(group._queue) < 5:  # all five queue behind the lone writer
        assert time.monotonic() < deadline, "the later writers did not queue"
        time.sleep(0.001)
    queued.set()
    for thread in [first, *threads]:
        thread.join(10)
    assert results == [[(i,)] for i in range(5)]
    assert batches[0] == ["first"] and sorted(batches[1]) == list(range(5))
    assert not group._leading and not group._queue


def test_a_lone_write_that_raises_still_hands_over() -> None:
    """A batch writer that raises (a bug, an interrupt) fails that write, not the group."""
    calls: list[Any] = []

    def write_batch(batch: list[Write]) -> None:
        calls.append(batch[0].params[0])
        if batch[0].params[0] == "bad":
            raise KeyboardInterrupt
        batch[0].finish([("ok",)])

    group = GroupCommit(write_batch)
    with pytest.raises(KeyboardInterrupt):
        within(10, lambda: group.write("sql", ("bad",)))
    assert within(10, lambda: group.write("sql", ("good",))) == ([("ok",)], False)
    assert calls == ["bad", "good"]


def test_a_refused_pair_undoes_only_itself_inside_a_batch(tmp_path: Path) -> None:
    """SQLite's step pair is all or nothing by aborting at a finished position (see
    `HistoryStatements._define_record_pair`). Inside a batch SQLite undoes that one
    statement, including the row it wrote before the finished one, and the batch's other
    writes commit: the pair answers that it wrote nothing, and is not a failure."""
    backend = SQLBackend(f"sqlite:///{tmp_path / 'batch.db'}")
    try:
        for run_id in ("r1", "r2"):
            backend.create_run(
                NewRun(id=run_id, workflow="w", input=b"j[]", call_hash="h", owner="o", lease=60)
            )
        backend.record(step("r1", 1), 1)  # the start's position finished, the result's free
        sql = backend._sql
        both = step_params(step("r1", 0), 1) + step_params(
            step("r1", 1, status=StepStatus.RUNNING, output=None), 1
        )
        pair = Write(
            sql.record_pair.sql, sql.record_pair_picks(both), name="Recording steps",
            refused=ABORTED,
        )  # fmt: skip
        quiet = sql.record_quiet
        assert quiet is not None
        alone = Write(quiet.sql, step_params(step("r2", 0), 1)[: len(quiet.order)])
        _group.in_one_transaction(backend._db, "Recording steps")([pair, alone])
        assert (pair.error, pair.rows, pair.retried) == (None, [(0,)], False)
        assert (alone.error, alone.rows) == (None, [(1,)])
        assert [(s.position, s.status) for s in backend.load_history("r1")] == [
            (1, StepStatus.COMPLETED)
        ]
        assert [s.position for s in backend.load_history("r2")] == [0]
    finally:
        backend.close()
