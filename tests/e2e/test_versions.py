"""A blue/green deploy with `durable worker --version V --only-version`, end to end.

Runs a v1 worker started are waiting when a v2 worker starts beside it; new runs are
created by the new code (stamped v2). Each worker is held (SIGSTOP) while the other
alone could claim the other's runs (new or waiting), and must not: the version
filter, not timing, decides who starts and continues what. The ledger and the recorded
results name the process (and its code version) that ran every body.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter

import pytest

import durable
from durable import RunStatus
from tests.e2e.checker import read_ledger
from tests.e2e.harness import Children
from tests.e2e.test_waits import status
from tests.e2e.test_workers import query, ready, stop_all, until
from tests.e2e.workers_app import deployed

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("url", SQL, indirect=True)]

OLD = [f"old-{i}" for i in range(3)]
NEW = [f"new-{i}" for i in range(3)]
#: Longer than a worker's poll (1 s): a claim that could take a run has had its chance.
CHANCE = 1.6


def versions(url: str, ids: list[str]) -> set[object]:
    listed = ", ".join(f"'{run_id}'" for run_id in ids)
    rows = query(url, f"SELECT version FROM durable_runs WHERE id IN ({listed})")
    return {row[0] for row in rows}


def all_in(url: str, ids: list[str], wanted: str) -> bool:
    return all(status(url, run_id) == wanted for run_id in ids)


def started(children: Children, version: str) -> subprocess.Popen[str]:
    worker = children.start_worker("--version", version, "--only-version")
    until(lambda: ready(children, worker), 30, f"the {version} worker to start")
    return worker


def test_old_runs_drain_on_the_old_worker_new_runs_run_on_the_new(
    children: Children, url: str, engine: durable.Engine
) -> None:
    """v1's waiting runs finish on the v1 worker, runs the v2 code created run on the v2
    worker, each left queued while only the other worker could have claimed it."""
    v1 = started(children, "v1")
    for run_id in OLD:
        durable.dispatch(deployed, id=run_id)
    until(lambda: all_in(url, OLD, "waiting"), 30, "the v1 runs to wait")
    assert versions(url, OLD) == {"v1"}, "stamped by the worker that first started them"

    v2 = started(children, "v2")
    v2.send_signal(signal.SIGSTOP)
    try:  # created by the new code (stamped v2): the v1 worker must leave them queued
        with durable.Engine(url, version="v2") as new_code:
            for run_id in NEW:
                new_code.dispatch_call(deployed.bind(), run_id=run_id)
        time.sleep(CHANCE)
        assert all_in(url, NEW, "queued"), "the v1 worker must not start v2's new runs"
    finally:
        v2.send_signal(signal.SIGCONT)
    until(lambda: all_in(url, NEW, "waiting"), 30, "the new runs to wait on v2")
    assert versions(url, NEW) == {"v2"}
    v1.send_signal(signal.SIGSTOP)
    try:
        for run_id in OLD:
            durable.send(run_id, "go")
        time.sleep(CHANCE)
        assert all_in(url, OLD, "queued"), "the v2 worker must leave v1's runs queued"
    finally:
        v1.send_signal(signal.SIGCONT)
    until(lambda: all_in(url, OLD, "completed"), 30, "the v1 runs to finish on v1")

    v2.send_signal(signal.SIGSTOP)
    try:
        for run_id in NEW:
            durable.send(run_id, "go")
        time.sleep(CHANCE)
        assert all_in(url, NEW, "queued"), "the v1 worker must leave v2's runs queued"
    finally:
        v2.send_signal(signal.SIGCONT)
    until(lambda: all_in(url, NEW, "completed"), 30, "the v2 runs to finish on v2")
    stop_all(children, [v1, v2])

    ran = {(entry.run_id, entry.position): entry.pid for entry in read_ledger(children.ledger)}
    for ids, worker, version in ((OLD, v1, "v1"), (NEW, v2, "v2")):
        for run_id in ids:
            assert ran[(run_id, 0)] == ran[(run_id, 2)] == worker.pid, (
                f"every body of {run_id} ran on the {version} worker"
            )
            handle = durable.get(run_id)
            assert handle.status() is RunStatus.COMPLETED
            steps = handle.result()
            assert [(s["pid"], s["version"]) for s in steps] == [(worker.pid, version)] * 2  # type: ignore[index]
    bodies = Counter(entry.run_id for entry in read_ledger(children.ledger))
    assert bodies == dict.fromkeys(OLD + NEW, 2), "each body ran once"
