"""Purging finished runs on the memory backend, under a virtual clock."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable import RunStatus, dispatch, task, wait, workflow
from durable.cli.purge import parse_age
from durable.testing import DurableEnv

DAY = dt.timedelta(days=1)

calls: list[int] = []


@pytest.fixture(autouse=True)
def _clean() -> None:
    calls.clear()


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as environment:
        yield environment


@task
def double(x: int) -> int:
    calls.append(x)
    return 2 * x


@workflow
def twice(x: int) -> int:
    return double(x) + double(x)


@workflow
def listener() -> Any:
    return wait("go")


@workflow
def month_long() -> None:
    wait(dt.timedelta(days=30))


@workflow
def parent_then_wait() -> int:
    value = twice(1)  # a child run, finished before the parent waits
    wait("go")
    return value


@workflow
def parent_dispatching() -> str:
    return dispatch(listener).id


def _gone(env: DurableEnv, run_id: str) -> bool:
    backend = env.backend
    return (
        backend.get_run(run_id) is None
        and not backend.load_history(run_id)
        and not backend.events(run_id)
    )


def test_old_finished_runs_go_with_their_history_and_events(env: DurableEnv) -> None:
    """Runs finished before the cutoff are deleted with every row of theirs; newer runs
    and unfinished runs, however old, stay with their history."""
    env.dispatch(twice, 1, id="old").result()
    heard = env.dispatch(listener, id="heard")
    env.send(heard, "other", 1)  # never consumed: still deleted with the run
    env.send(heard, "go", 2)
    assert heard.status() is RunStatus.COMPLETED
    assert len(env.backend.events("heard")) == 2
    env.dispatch(listener, id="waiting")
    env.dispatch(month_long, id="sleeping")
    env.advance(2 * DAY)
    env.dispatch(twice, 2, id="recent").result()

    assert durable.purge(DAY) == 2

    assert _gone(env, "old") and _gone(env, "heard")
    assert env.run("waiting").status is RunStatus.WAITING
    assert env.run("sleeping").status is RunStatus.WAITING
    assert env.run("recent").status is RunStatus.COMPLETED
    assert len(env.history("recent")) == 2, "a kept run keeps its history"
    assert durable.purge(DAY) == 0


def test_the_age_is_measured_from_finishing(env: DurableEnv) -> None:
    """older_than in seconds: a run that finished 100 s ago goes at 50 s, one that
    finished 10 s ago does not."""
    env.dispatch(twice, 1, id="earlier").result()
    env.advance(90)
    env.dispatch(twice, 2, id="later").result()
    env.advance(10)
    assert env.engine.purge(50.0) == 1
    assert env.backend.get_run("earlier") is None
    assert env.backend.get_run("later") is not None
    assert env.engine.purge(0) == 1, "0 means: everything that has finished"


def test_a_live_parent_keeps_its_finished_children(env: DurableEnv) -> None:
    """A child finished long ago stays while its parent may still replay and read it;
    once the parent has finished long enough, both go."""
    parent = env.dispatch(parent_then_wait, id="p")
    assert env.run("p/0").status is RunStatus.COMPLETED
    assert env.run("p").status is RunStatus.WAITING
    env.advance(2 * DAY)
    assert durable.purge(DAY) == 0
    assert len(env.history("p/0")) == 2

    env.send(parent, "go")
    assert parent.result() == 4
    assert durable.purge(DAY) == 0, "the parent finished just now"
    env.advance(2 * DAY)
    assert durable.purge(DAY) == 2
    assert _gone(env, "p") and _gone(env, "p/0")


def test_a_live_child_keeps_its_finished_parent(env: DurableEnv) -> None:
    """A finished parent stays while a run it dispatched lives, so that cancelling the
    parent still reaches the child."""
    child = env.dispatch(parent_dispatching, id="q").result()
    assert env.run(child).status is RunStatus.WAITING
    env.advance(2 * DAY)
    assert durable.purge(DAY) == 0

    durable.cancel("q")
    env.drain()
    assert env.run(child).status is RunStatus.CANCELLED
    env.advance(2 * DAY)
    assert durable.purge(DAY) == 2
    assert _gone(env, "q") and _gone(env, child)


def test_purge_deletes_in_batches(env: DurableEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch deletes at most `batch` runs; batches follow until none is left."""
    for i in range(25):
        env.dispatch(twice, i).result()
    env.advance(2 * DAY)
    batches: list[tuple[int, int]] = []
    purge = env.backend.purge

    def spy(**options: Any) -> int:
        deleted = purge(**options)
        batches.append((options["limit"], deleted))
        return deleted

    monkeypatch.setattr(env.backend, "purge", spy)
    assert durable.purge(DAY, batch=10) == 25
    assert batches == [(10, 10), (10, 10), (10, 5), (10, 0)]


def test_a_purged_id_is_free_again(env: DurableEnv) -> None:
    """Dispatching with the id of a purged run starts a new run, which executes."""
    env.dispatch(twice, 3, id="again").result()
    env.advance(2 * DAY)
    assert durable.purge(DAY) == 1
    assert env.dispatch(twice, 3, id="again").result() == 12
    assert calls == [3, 3, 3, 3], "the new run executed its tasks"


@pytest.mark.parametrize(
    ("older_than", "batch", "error"),
    [
        (-1, 1000, ValueError),
        (float("nan"), 1000, ValueError),
        (dt.timedelta(seconds=-5), 1000, ValueError),
        ("7d", 1000, TypeError),
        (True, 1000, TypeError),
        (DAY, 0, ValueError),
        (DAY, 2.5, ValueError),
    ],
)
def test_bad_arguments_delete_nothing(
    env: DurableEnv, older_than: Any, batch: Any, error: type[Exception]
) -> None:
    """A negative or non-numeric age, or a batch that is not a positive whole number,
    raises before anything is deleted."""
    env.dispatch(twice, 1, id="kept").result()
    env.advance(2 * DAY)
    with pytest.raises(error):
        durable.purge(older_than, batch=batch)
    assert env.backend.get_run("kept") is not None


def test_the_backend_refuses_an_empty_batch(env: DurableEnv) -> None:
    """Backend.purge needs a limit of at least one run."""
    with pytest.raises(ValueError, match="at least one run"):
        env.backend.purge(finished_before=env.clock.now(), limit=0)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("15m", 900),
        ("12h", 43_200),
        ("7d", 604_800),
        ("2w", 1_209_600),
        ("1.5h", 5_400),
        (" 7D ", 604_800),
        ("0s", 0),
    ],
)
def test_cli_ages(text: str, seconds: float) -> None:
    """`durable purge --older-than` reads a number and one unit: s, m, h, d or w."""
    assert parse_age(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["7", "7x", "d", "-1d", "1d2h", "", "seven days"])
def test_cli_ages_that_are_not(text: str) -> None:
    """Anything else is a usage error that shows the accepted forms."""
    with pytest.raises(argparse.ArgumentTypeError, match="30s, 15m, 12h, 7d or 2w"):
        parse_age(text)
