"""Two processes call durable.recover() on the same expired run: one owns it, and the
owner it was taken from is fenced off.

The run's owner is alive but frozen (SIGSTOP) with its lease run out: either a process
on this host, or one whose owner string names another host. Neither is known dead, so
only the expired lease lets the recoverers in (tests/e2e/test_crash.py races for a
run whose owner was killed). Both recoverers are held at their claim until the other
gets there too, so they really compete for the same epoch.

The children run `tests.e2e.app` as ``__main__`` (its workflows keep the names other
e2e tests give them) after `child` has set them up from the environment:

    RACE_OWNER_HOST      the host name this process puts in its owner string
    RACE_CLAIM_BARRIER   a directory: wait there for the other recoverer before claiming,
                         then leave ``won.<pid>`` or ``lost.<pid>``
"""

from __future__ import annotations

import dataclasses
import os
import runpy
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import RunStatus
from durable.backends.sql import SQLBackend
from durable.errors import LeaseLost
from durable.runtime import owners as _owner
from tests.e2e.harness import Children
from tests.e2e.test_crash import stored

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.e2e

#: How long a recoverer waits at the claim for the other one.
BARRIER_WAIT = 30.0


def child() -> None:
    """Entry point of this test's child processes: set up, then run tests.e2e.app."""
    host = os.environ.get("RACE_OWNER_HOST")
    if host:
        _owner.host = lambda: host  # type: ignore[assignment]
    barrier = os.environ.get("RACE_CLAIM_BARRIER")
    if barrier:
        _claim_at_the_barrier(Path(barrier))
    runpy.run_module("tests.e2e.app", run_name="__main__", alter_sys=True)


def _claim_at_the_barrier(barrier: Path) -> None:
    """Make every claim wait until two processes are about to claim; note who won."""
    claim_run = SQLBackend.claim_run

    def claim_when_both_are_here(self: SQLBackend, run_id: str, **options: Any) -> Any:
        (barrier / f"ready.{os.getpid()}").touch()
        deadline = time.monotonic() + BARRIER_WAIT
        while len(list(barrier.glob("ready.*"))) < 2:
            if time.monotonic() > deadline:
                raise SystemExit(f"the other recoverer never came to claim {run_id}")
            time.sleep(0.002)
        claimed = claim_run(self, run_id, **options)
        (barrier / f"{'won' if claimed else 'lost'}.{os.getpid()}").touch()
        return claimed

    SQLBackend.claim_run = claim_when_both_are_here  # type: ignore[method-assign]


def start(children: Children, *args: str, **env: str) -> subprocess.Popen[str]:
    """Start a child running `child`, then ``tests.e2e.app ARGS``."""
    code = "from tests.e2e.test_recover_race import child; child()"
    return children.spawn(["-c", code, *args], **env)


def freeze(children: Children, process: subprocess.Popen[str], url: str) -> None:
    """SIGSTOP *process* at a moment it holds no SQLite write lock: its heartbeat writes
    now and then, and a process frozen inside that write would block every other."""
    for _ in range(50):
        children.kill(process, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while _state(process.pid) != "T":  # the signal is delivered asynchronously
            assert time.monotonic() < deadline, f"{process.pid} did not stop"
            time.sleep(0.001)
        if not url.startswith("sqlite") or _can_write(url.removeprefix("sqlite:///")):
            return
        children.kill(process, signal.SIGCONT)
    raise AssertionError("the process always held the write lock")


def _state(pid: int) -> str | None:
    """The process state letter from /proc (T: stopped), or None if it is gone."""
    stat = _owner._proc_stat(pid)
    return None if stat is None else stat[0]


def _can_write(path: str) -> bool:
    """Whether the SQLite file at *path* can be locked for writing now."""
    conn = sqlite3.connect(path, timeout=0.1, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        conn.close()


def wait_until_expired(url: str, run_id: str, timeout: float = 15) -> durable.Run:
    """Poll until the lease of run *run_id* has run out (on the database's clock)."""
    with durable.Engine(url) as engine:
        deadline = time.monotonic() + timeout
        while True:
            run = engine.backend.get_run(run_id)
            assert run is not None and run.status is RunStatus.RUNNING
            if run.lease_until is not None and run.lease_until < engine.clock.now():
                return run
            assert time.monotonic() < deadline, f"the lease of {run_id} never ran out"
            time.sleep(0.05)


@pytest.mark.parametrize("owner", ["frozen-here", "other-host"])
@pytest.mark.parametrize("url", SQL, indirect=True)
def test_two_recoverers_race_for_an_expired_run(
    children: Children, url: str, tmp_path: Path, owner: str
) -> None:
    """Two recover() calls claim an expired run at once: exactly one owns and finishes it.
    The owner it was taken from wakes up, and its write is rejected by the epoch fence."""
    host = "elsewhere" if owner == "other-host" else _owner.host()
    victim = start(
        children,
        "run",
        url,
        "race",
        DURABLE_TEST_PAUSE="between",
        DURABLE_TEST_LEASE="1",
        **({"RACE_OWNER_HOST": host} if owner == "other-host" else {}),
    )
    children.wait_for_pause("between")
    freeze(children, victim, url)  # alive, but its heartbeat stops
    expired = wait_until_expired(url, "race")
    assert expired.lease_owner is not None
    place = f"{host}@{_owner.place().partition('@')[2]}"  # its boot and PID namespace are ours
    assert expired.lease_owner.split(":")[:2] == [place, str(victim.pid)]
    assert not _owner.is_dead(expired.lease_owner), "only the lease may say it is gone"
    _, recorded, _ = stored(url, "race")
    assert [(step.epoch, step.status.value) for step in recorded] == [
        (1, "completed"), (1, "completed"), (1, "running"),
    ], "task 3 had started (the victim froze at the top of its body)"  # fmt: skip

    barrier = tmp_path / "barrier"
    barrier.mkdir()
    racers = [start(children, "recover", url, RACE_CLAIM_BARRIER=str(barrier)) for _ in range(2)]
    returned = {racer.pid: children.finish(racer) for racer in racers}
    assert sorted(returned.values()) == [[], ["race"]], "exactly one recoverer owns the run"
    winner = next(pid for pid, ids in returned.items() if ids == ["race"])
    loser = next(pid for pid, ids in returned.items() if ids == [])
    assert sorted(path.name for path in barrier.iterdir()) == sorted(
        [f"ready.{winner}", f"ready.{loser}", f"won.{winner}", f"lost.{loser}"]
    ), "both claimed the same run at the same epoch; the loser's claim was refused"

    run, history, result = stored(url, "race")
    assert run.status is RunStatus.COMPLETED
    assert run.epoch == 2, "claimed once: the loser never got an epoch"
    assert [step.epoch for step in history] == [1, 1, 2]
    assert result == [
        {"i": 1, "pid": victim.pid},
        {"i": 2, "pid": victim.pid},
        {"i": 3, "pid": winner},
    ]
    assert children.bodies() == Counter({("race", 0): 1, ("race", 1): 1, ("race", 2): 1})

    # The frozen owner wakes up at epoch 1 and runs task 3: its write must be rejected.
    children.release("between", victim.pid)
    children.kill(victim, signal.SIGCONT)
    assert children.finish(victim) == result, "it gives up the run and returns its outcome"
    assert "lease lost" in children.log(victim)
    assert children.bodies()[("race", 2)] == 2, "its task 3 body ran; its record did not count"
    assert stored(url, "race") == (run, history, result), "the stale owner changed nothing"

    # The same fence, written from here at the old epoch: a rewrite and a new position.
    with durable.Engine(url) as engine:
        for position in (2, 3):
            late = dataclasses.replace(history[2], position=position, output=b"j0", epoch=1)
            with pytest.raises(LeaseLost):
                engine.backend.record(late, 1)
        assert list(engine.backend.load_history("race")) == history
