"""Flow control (issue 16): what users write is checked at the call, and a worker
keeps a queue's limits (docs/concepts/flow-control.md). The limits across processes
and databases are proven by the conformance checks and tests/e2e/test_limits_storm.py."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator

import pytest

import durable
from durable import task, workflow
from durable.core.queues import Queue, admits, choose, key_starts, make_queue
from durable.core.records import Run, RunQuery, RunStatus
from durable.runtime import limits

running_now: list[str] = []
most: dict[str, int] = {}
guard = threading.Lock()


@task
def slot(name: str, group: str) -> str:
    with guard:
        running_now.append(group)
        most[group] = max(most.get(group, 0), running_now.count(group))
    time.sleep(0.05)
    with guard:
        running_now.remove(group)
    return name


@workflow
def occupy(name: str, group: str) -> str:
    return slot(name, group)


@pytest.fixture
def engine() -> Iterator[durable.Engine]:
    engine = durable.configure("memory://")
    most.clear()
    try:
        yield engine
    finally:
        engine.close()


# -- bad input -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "error", "words"),
    [
        ({"concurrency": 0}, ValueError, "concurrency= must be from 1"),
        ({"concurrency": 2.5}, TypeError, "concurrency= must be a positive int"),
        ({"key_concurrency": -1}, ValueError, "key_concurrency= must be from 1"),
        ({"rate": (0, 1)}, ValueError, "a rate of 0 per period"),
        ({"rate": (5, 0)}, ValueError, "period must be a positive duration"),
        ({"rate": 5}, TypeError, "rate= must be (starts, period)"),
        ({"rate": (True, 1)}, TypeError, "starts must be an int"),
        ({"key_rate": (0, 1)}, ValueError, "key_rate='s starts must be from 1"),
        ({"key_rate": (5, -1)}, ValueError, "key_rate='s period must be a positive duration"),
        ({"key_rate": "5/s"}, TypeError, "key_rate= must be (starts, period)"),
    ],
)
def test_bad_limits_are_refused_naming_the_field(
    engine: durable.Engine, fields: dict[str, object], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        durable.queue("q", **fields)  # type: ignore[arg-type]
    assert engine.backend.get_queue("q") is None, "nothing was stored"


def test_a_key_limit_needs_a_key_and_a_positive_int(engine: durable.Engine) -> None:
    with pytest.raises(ValueError, match="give key= too"):
        durable.dispatch(occupy, "a", "g", key_concurrency=1)
    with pytest.raises(ValueError, match="key_concurrency= must be from 1"):
        durable.dispatch(occupy, "a", "g", key="k", key_concurrency=0)
    with pytest.raises(TypeError, match="A key must be a string"):
        durable.dispatch(occupy, "a", "g", key=42)
    with pytest.raises(ValueError, match="A key must not be empty"):
        durable.dispatch(occupy, "a", "g", key="")
    assert engine.backend.list_runs(durable.core.records.RunQuery(), limit=10) == []


def test_queue_stores_and_replaces_the_limits(engine: durable.Engine) -> None:
    stored = durable.queue("emails", concurrency=20, rate=(100, dt.timedelta(seconds=1)))
    assert stored == Queue(name="emails", concurrency=20, rate=100, per=1.0)
    durable.queue("emails", key_concurrency=2)
    assert engine.backend.get_queue("emails") == Queue(name="emails", key_concurrency=2)


# -- the rule -------------------------------------------------------------------------


def _run(run_id: str, *, key: str | None = None, started: float | None = None) -> Run:
    return Run(
        id=run_id, workflow="w", status=RunStatus.QUEUED, input=b"", call_hash="h",
        output=None, error=None, epoch=0, lease_owner=None, lease_until=None, recoveries=0,
        parent_id=None, created_at=0.0, updated_at=0.0, finished_at=None, key=key,
        started_at=started,
    )  # fmt: skip


def test_choose_ranks_keys_caps_first_starts_and_fills_free_slots() -> None:
    ready = [
        _run("a1", key="a"),
        _run("a2", key="a"),
        _run("b1", key="b", started=1.0),
        _run("p1"),
        _run("p2"),
    ]
    queue = make_queue("q", concurrency=4, key_concurrency=1, rate=(2, 10))
    # a1 and p1 use the rate's two first starts; a2 waits for key a; b1 is resumed (no
    # start); p2 would be a third first start in the window.
    taken = choose(queue, ready, [], [], now=100.0, limit=10)
    assert [run.id for run in taken] == ["a1", "b1", "p1"]
    # a running run of key b holds b1 back, and the full window holds every first start
    running = [_run("b0", key="b")]
    taken = choose(queue, ready, running, [95.0, 99.0], now=100.0, limit=10)
    assert taken == []
    # the window has moved on past one start; a slot count of 1 caps the batch
    one = make_queue("q", concurrency=2)
    taken = choose(one, ready, running, [], now=100.0, limit=10)
    assert [run.id for run in taken] == ["a1"]


def test_choose_keeps_each_keys_rate_counting_its_recent_starts() -> None:
    ready = [
        _run("a1", key="a"),
        _run("a2", key="a"),
        _run("a3", key="a"),
        _run("b1", key="b"),
        _run("a0", key="a", started=99.0),
        _run("p1"),
    ]
    queue = make_queue("q", key_rate=(2, 10))
    # two first starts of key a fit; a3 would be the third; a resumed run is no start
    taken = choose(queue, ready, [], [], now=100.0, limit=10)
    assert [run.id for run in taken] == ["a1", "a2", "b1", "a0", "p1"]
    # a start of key a inside the window leaves room for one; key b's are out of it
    recent = key_starts(
        queue, [_run("x", key="a", started=95.0), _run("y", key="b", started=89.0)], 100.0
    )
    assert recent == {"a": 1}
    taken = choose(queue, ready, [], [], now=100.0, limit=10, started=recent)
    assert [run.id for run in taken] == ["a1", "b1", "a0", "p1"]
    fresh = _run("a9", key="a")
    assert admits(queue, fresh, [], [], 100.0, started=recent)
    assert not admits(queue, fresh, [], [], 100.0, started=recent + recent)
    assert admits(queue, _run("a8", key="a", started=1.0), [], [], 100.0, started=recent + recent)


def test_a_worker_claims_again_as_soon_as_its_own_run_frees_a_slot(
    engine: durable.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim held back by a limit is retried when one of the worker's runs ends, not
    only at the next retry: with the retry and the poll an hour away, five runs of a
    queue of one slot still run one after the other."""
    monkeypatch.setattr(limits, "SOON", 3600.0)
    durable.queue("single", concurrency=1)
    handles = [durable.dispatch(occupy, f"s{i}", "single", queue="single") for i in range(5)]
    with durable.Worker(engine, queues=["single"], concurrency=4, poll=3600):
        results = [handle.result(timeout=20) for handle in handles]
    assert sorted(results) == [f"s{i}" for i in range(5)]
    assert most["single"] == 1


def test_a_worker_keeps_each_keys_rate(engine: durable.Engine) -> None:
    durable.queue("paced", key_rate=(2, dt.timedelta(seconds=0.6)))
    handles = [
        durable.dispatch(occupy, f"{key}{i}", key, queue="paced", key=key)
        for i in range(4)
        for key in ("a", "b")
    ]
    with durable.Worker(engine, queues=["paced"], concurrency=8, poll=0.05):
        for handle in handles:
            handle.result(timeout=30)
    for key in ("a", "b"):
        starts = sorted(
            run.started_at
            for run in engine.backend.list_runs(RunQuery(workflow=occupy.name), limit=100)
            if run.key == key and run.started_at is not None
        )
        assert len(starts) == 4
        assert starts[2] - starts[0] >= 0.6 - 1e-3, f"key {key}: three starts in one window"
        assert starts[3] - starts[1] >= 0.6 - 1e-3, f"key {key}: three starts in one window"


# -- on a worker ----------------------------------------------------------------------


def test_a_worker_keeps_a_queue_and_a_key_limit(engine: durable.Engine) -> None:
    durable.queue("narrow", concurrency=2)
    handles = [durable.dispatch(occupy, f"n{i}", "narrow", queue="narrow") for i in range(8)]
    handles += [
        durable.dispatch(occupy, f"k{i}", "key-a", queue="keyed", key="a", key_concurrency=1)
        for i in range(5)
    ]
    handles += [durable.dispatch(occupy, f"w{i}", "wide", queue="keyed") for i in range(6)]
    with durable.Worker(engine, queues=["narrow", "keyed"], concurrency=8, poll=0.05):
        results = [handle.result(timeout=30) for handle in handles]
    assert sorted(results) == sorted(
        [f"n{i}" for i in range(8)] + [f"k{i}" for i in range(5)] + [f"w{i}" for i in range(6)]
    )
    assert most["narrow"] == 2, most
    assert most["key-a"] == 1, most
    assert most["wide"] > 2, f"runs without a key are not held back: {most}"


# -- debounce -------------------------------------------------------------------------

summed: list[int] = []


@workflow
def summarize(customer: str, version: int) -> int:
    summed.append(version)
    return version


def test_a_burst_of_a_hundred_dispatches_makes_one_run_with_the_last_arguments() -> None:
    from durable.testing import DurableEnv

    summed.clear()
    window = dt.timedelta(seconds=5)
    with DurableEnv() as env:
        handles = [
            env.dispatch(summarize, "c-42", i, key="c-42", debounce=window) for i in range(100)
        ]
        other = env.dispatch(summarize, "c-7", -1, key="c-7", debounce=window)
        assert len({handle.id for handle in handles}) == 1, "every caller's handle is the run"
        assert other.id != handles[0].id, "another key, another run"
        assert summed == [], "nothing starts inside the window"
        env.advance(window)
        assert handles[0].result() == 99 and other.result() == -1
        assert sorted(summed) == [-1, 99], "one run per key, with the last arguments"
        again = env.dispatch(summarize, "c-42", 100, key="c-42", debounce=window)
        assert again.id != handles[0].id, "after the run started, a new burst is a new run"
        env.advance(window)
        assert again.result() == 100


def test_each_dispatch_pushes_the_start_but_never_past_ten_windows() -> None:
    from durable.testing import DurableEnv

    summed.clear()
    with DurableEnv() as env:
        first = env.dispatch(summarize, "c", 0, key="c", debounce=10)
        for i in range(1, 20):
            env.advance(9)  # each dispatch comes before the window ends: the start moves
            handle = env.dispatch(summarize, "c", i, key="c", debounce=10)
            if summed:
                break
        assert handle.id != first.id and summed, "a steady stream cannot postpone it forever"
        assert first.result() == summed[0] and 9 <= summed[0] <= 11, summed


def test_debounce_needs_a_key_and_refuses_an_id(engine: durable.Engine) -> None:
    with pytest.raises(ValueError, match="give key= too"):
        durable.dispatch(summarize, "c", 1, debounce=5)
    with pytest.raises(TypeError, match="give no id="):
        durable.dispatch(summarize, "c", 1, key="c", debounce=5, id="mine")
    with pytest.raises(ValueError, match="debounce= must be a positive duration"):
        durable.dispatch(summarize, "c", 1, key="c", debounce=0)
    assert engine.backend.list_runs(durable.core.records.RunQuery(), limit=10) == []
