"""Streams out of running workflows, on memory, SQLite and PostgreSQL: a reader started
before the writer gets every value in order and live (while the run still waits), a
replay writes nothing again, a retried task's attempts keep their values, readers end
at the close or at the run's end, and bad writes are refused clearly."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable import RetryPolicy, RunStatus, task, wait, workflow
from durable.errors import DurableError, InvalidValue, PayloadTooLarge, SerializationError
from durable.runtime.worker import Worker
from tests.conftest import BACKENDS

pytestmark = pytest.mark.parametrize("url", BACKENDS, indirect=True)

TOKENS = durable.stream("tokens")


@task
def double(n: int) -> int:
    return 2 * n


@workflow
def chatter(count: int) -> int:
    """Writes 0..count-1 with a task between them, waits for "more" after the first
    value (so readers see it while the run waits), then closes."""
    total = 0
    for n in range(count):
        TOKENS.write(n)
        total += double(n)
        if n == 0:
            wait("more")
    TOKENS.close()
    return total


class Reader:
    """A thread reading a run's stream into a list, with a condition to await values."""

    def __init__(self, handle: durable.Handle[Any], name: str = "tokens") -> None:
        self.values: list[Any] = []
        self.done = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(handle, name), daemon=True)
        self._thread.start()

    def _read(self, handle: durable.Handle[Any], name: str) -> None:
        try:
            for value in handle.stream(name):
                with self._changed:
                    self.values.append(value)
                    self._changed.notify_all()
        finally:
            self.done.set()
            with self._changed:
                self._changed.notify_all()

    def until(self, count: int, timeout: float = 20.0) -> list[Any]:
        with self._changed:
            assert self._changed.wait_for(lambda: len(self.values) >= count, timeout), (
                f"expected {count} values, got {self.values}"
            )
        return list(self.values)

    def finish(self, timeout: float = 20.0) -> list[Any]:
        assert self.done.wait(timeout), f"the reader did not end: {self.values}"
        return list(self.values)


@pytest.fixture
def worker(engine: durable.Engine) -> Iterator[Worker]:
    with Worker(engine, poll=0.05) as running:
        yield running


def test_a_reader_started_first_gets_every_value_live_and_in_order(engine: durable.Engine) -> None:
    handle = durable.dispatch(chatter, 5)
    reader = Reader(handle)  # before any worker: nothing written yet
    with Worker(engine, poll=0.05):
        assert reader.until(1) == [0]
        assert handle.status() is not RunStatus.COMPLETED, "the value came while it ran"
        assert not reader.done.is_set()
        durable.send(handle.id, "more", None)
        assert reader.finish() == [0, 1, 2, 3, 4]
        assert handle.result(timeout=20) == 20
    info = [(s.name, s.length, s.closed) for s in engine.backend.streams(handle.id)]
    assert info == [("tokens", 5, True)], "the replay after the wait wrote nothing again"
    assert list(handle.stream("tokens", offset=3)) == [3, 4], "from any offset"


def test_async_for_reads_the_same_values(engine: durable.Engine, worker: Worker) -> None:
    handle = durable.dispatch(chatter, 3)
    durable.send(handle.id, "more", None)

    async def read() -> list[Any]:
        return [value async for value in handle.stream("tokens")]

    assert asyncio.run(read()) == [0, 1, 2]


@workflow
def unclosed() -> str:
    durable.stream("log").write("started")
    durable.stream("log").write({"step": 1, "of": 1})
    return "done"


def test_a_stream_never_closed_ends_with_its_run(engine: durable.Engine, worker: Worker) -> None:
    handle = durable.dispatch(unclosed)
    assert list(handle.stream("log")) == ["started", {"step": 1, "of": 1}]
    assert list(handle.stream("nothing")) == [], "a stream never written ends with the run"
    assert handle.result(timeout=20) == "done"

    async def read(name: str) -> list[Any]:
        return [value async for value in handle.stream(name)]

    assert asyncio.run(read("log")) == ["started", {"step": 1, "of": 1}], "awaited alike"
    assert asyncio.run(read("nothing")) == []


ATTEMPTS: list[int] = []


@task(retry=RetryPolicy(attempts=2, initial=0.01))
def flaky_producer() -> str:
    ATTEMPTS.append(1)
    attempt = len(ATTEMPTS)
    progress = durable.stream("progress")
    progress.write(f"attempt {attempt} started")
    if attempt == 1:
        raise RuntimeError("the first attempt fails after writing")
    progress.write(f"attempt {attempt} done")
    progress.close()
    return "ok"


@workflow
def produce() -> str:
    return flaky_producer()


def test_a_retried_tasks_attempts_keep_their_values(engine: durable.Engine) -> None:
    ATTEMPTS.clear()
    handle = durable.dispatch(produce)
    with Worker(engine, poll=0.05):
        assert handle.result(timeout=20) == "ok"
    assert list(handle.stream("progress")) == [
        "attempt 1 started",
        "attempt 2 started",
        "attempt 2 done",
    ]


@workflow
def misuse(kind: str) -> str:
    stream = durable.stream("s")
    try:
        if kind == "closed":
            stream.write(1)
            stream.close()
            stream.close()  # closing again does nothing
            stream.write(2)
        elif kind == "large":
            stream.write("x" * 2048)
        elif kind == "unstorable":
            stream.write(threading.Lock())
        elif kind == "read":
            durable.Handle(durable.get_engine(), "someone").stream("s")
    except DurableError as error:
        return f"{type(error).__name__}: {error}"
    return "no error"


@pytest.mark.parametrize(
    ("kind", "error", "words"),
    [
        ("closed", InvalidValue, "is closed"),
        ("large", PayloadTooLarge, "stream 's'"),
        ("unstorable", SerializationError, "stream 's'"),
        ("read", DurableError, "in a task, or outside runs"),
    ],
)
def test_bad_writes_are_refused_clearly(
    engine: durable.Engine, kind: str, error: type[Exception], words: str
) -> None:
    engine.max_payload = 1024  # "large" is over it
    handle = durable.dispatch(misuse, kind)
    with Worker(engine, poll=0.05):
        outcome = handle.result(timeout=20)
    assert outcome.startswith(f"{error.__name__}: ") and words in outcome, outcome
    assert list(handle.stream("s")) == ([1] if kind == "closed" else []), "nothing more stored"


def test_outside_a_run_and_bad_names(engine: durable.Engine) -> None:
    with pytest.raises(DurableError, match="only inside a workflow or a task body"):
        TOKENS.write(1)
    with pytest.raises(DurableError, match="only inside a workflow or a task body"):
        TOKENS.close()
    with pytest.raises(InvalidValue, match="must not be empty"):
        durable.stream("")
    with pytest.raises(InvalidValue, match="NUL"):
        durable.stream("a\x00b")
    with pytest.raises(InvalidValue, match="at most 200"):
        durable.stream("x" * 201)
    with pytest.raises(InvalidValue, match="offset"):
        durable.Handle(engine, "any").stream("tokens", offset=-1)
    with pytest.raises(durable.errors.RunNotFound):
        list(durable.Handle(engine, "nobody").stream("tokens"))


@workflow
def counted(n: int) -> int:
    """Writes 0..n-1 with a task after each."""
    for i in range(n):
        durable.stream("counted").write(i)
        double(i)
    return n


def test_a_fork_rewrites_the_workflows_values_and_a_dry_replay_writes_none(
    engine: durable.Engine, worker: Worker
) -> None:
    original = durable.dispatch(counted, 3)
    assert original.result(timeout=20) == 3
    from durable.runtime.dry_replay import dry_replay

    run = engine.reread(original.id)
    dry_replay(engine, counted, run, engine.backend.load_history(original.id))
    assert [s.length for s in engine.backend.streams(original.id)] == [3], "nothing written"
    fork = original.fork(2)  # tasks 0 and 1 copied; the fork replays their writes
    assert fork.result(timeout=20) == 3
    assert list(fork.stream("counted")) == [0, 1, 2], "its own streams, from its code"
    assert list(original.stream("counted")) == [0, 1, 2], "the original's unchanged"


@workflow
def chained(round_: int) -> str:
    durable.stream("rounds").write(round_)
    if round_ == 0:
        durable.continue_as_new(1)
    return "last"


def test_a_successor_starts_with_no_streams(engine: durable.Engine, worker: Worker) -> None:
    first = durable.dispatch(chained, 0)
    assert first.result(timeout=20) == "last"
    assert list(first.stream("rounds")) == [0], "the first run's reader ends at the hand-over"
    successor = durable.Handle(engine, f"{first.id}~1")
    assert list(successor.stream("rounds")) == [1]


@task
async def async_writer(n: int) -> int:
    await durable.stream("mixed").write_async(f"task {n}")
    durable.stream("mixed").write(f"task {n} again")  # the plain write works here too
    return n


@workflow
async def async_flow() -> list[int]:
    mixed = durable.stream("mixed")
    await mixed.write_async("start")
    got = await asyncio.gather(async_writer(1), async_writer(2))
    await asyncio.gather(*(mixed.write_async(f"end {i}") for i in range(3)))
    wait_for = durable.wait("more")  # a replay after the wait writes nothing again
    await mixed.write_async(wait_for)
    await mixed.close_async()
    return list(got)


def test_async_workflows_and_tasks_write_too(engine: durable.Engine, worker: Worker) -> None:
    """On a worker (async runs on its lane), write_async from workflow code and task
    bodies; writes gathered in workflow code are numbered in call order, so the replay
    after the wait finds each one stored."""
    handle = durable.dispatch(async_flow)
    reader = Reader(handle, "mixed")
    assert reader.until(8)[-3:] == ["end 0", "end 1", "end 2"]
    durable.send(handle.id, "more", "last")
    assert handle.result(timeout=20) == [1, 2]
    values = reader.finish()
    assert values[0] == "start" and values[5:] == ["end 0", "end 1", "end 2", "last"]
    assert sorted(values[1:5]) == ["task 1", "task 1 again", "task 2", "task 2 again"]
    assert [s.length for s in engine.backend.streams(handle.id)] == [9]
