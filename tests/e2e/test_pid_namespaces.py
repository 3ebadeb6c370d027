"""Workers in their own PID namespaces on one host: they must never steal each other's runs.

Each worker runs under ``unshare --pid --fork --mount-proc``, so both are pid 1 of
namespaces that share the host name, the boot and the database, as two containers with
a fixed ``hostname:`` are. A pid in one namespace means nothing in the other: the only
sign of an owner's death that crosses namespaces is its expired lease.

Needs root (or unprivileged user namespaces) and util-linux ``unshare``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections import Counter

import pytest

import durable
from durable import RunStatus
from durable.runtime import owners
from tests.e2e.harness import Children
from tests.e2e.workers_app import slow

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.e2e

UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run([*UNSHARE, "true"], capture_output=True, check=False)
    return probe.returncode == 0


needs_unshare = pytest.mark.skipif(not _can_unshare(), reason="needs unshare --pid (root)")


def owner_in_namespace(*unshare: str) -> str:
    """The owner string a process in a new PID namespace makes for itself."""
    code = "from durable.runtime import owners; print(owners.new_owner())"
    done = subprocess.run(
        [*unshare, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@needs_unshare
def test_an_owner_in_another_namespace_is_never_judged_here() -> None:
    """Its pid (1) is another process here: only its lease may say it is gone."""
    owner = owner_in_namespace(*UNSHARE)
    place, pid, _, _ = owner.rsplit(":", 3)
    assert pid == "1" and place.startswith(owners.host() + "@")
    assert place != owners.place(), "another PID namespace is another place"
    assert not owners.is_dead(owner)


@needs_unshare
def test_a_proc_of_another_namespace_makes_the_place_unknown() -> None:
    """``unshare --pid`` without a /proc of its own: the pids /proc lists are not the
    process's own, so it claims no place where /proc could judge its owners."""
    owner = owner_in_namespace("unshare", "--pid", "--fork", "--kill-child")
    assert owner.startswith(f"{owners.host()}@unknown:1:"), owner


def worker_owner(children: Children, worker: subprocess.Popen[str]) -> str:
    """The owner string a started worker logged, waiting for it to start."""
    deadline = time.monotonic() + 30
    while True:
        found = re.search(r"worker (\S+): queues", children.log(worker))
        if found:
            return found.group(1)
        assert worker.poll() is None, f"the worker exited:\n{children.log(worker)}"
        assert time.monotonic() < deadline, f"the worker did not start:\n{children.log(worker)}"
        time.sleep(0.05)


@needs_unshare
@pytest.mark.parametrize("url", SQL, indirect=True)
def test_workers_in_two_pid_namespaces_leave_each_others_runs_alone(
    children: Children, url: str
) -> None:
    """Two workers, each pid 1 of its own namespace, sweep every second for orphans while
    one of them executes a 4.5 s run: the other never takes it over; each task body runs
    once and the run completes at its first epoch."""
    command = [*UNSHARE, sys.executable, "-m", "durable", "worker", "tests.e2e.workers_app"]
    options = ["--db", url, "--log-level", "INFO", "--lease", "3", "--concurrency", "2"]
    workers = []
    for _ in range(2):
        # One after the other: their pid 1s then have different start times.
        workers.append(children.command([*command, *options]))
        worker_owner(children, workers[-1])
    places = [worker_owner(children, w).rsplit(":", 3)[0] for w in workers]
    pids = [worker_owner(children, w).rsplit(":", 3)[1] for w in workers]
    assert pids == ["1", "1"] and places[0] != places[1], "two namespaces, one host"
    assert {place.partition("@")[0] for place in places} == {owners.host()}

    with durable.Engine(url) as engine:
        engine.dispatch_call(slow.bind(1.5), run_id="shared")
        run = engine.wait_for_run("shared", timeout=60)
    bodies = Counter(tuple(line.split()[:2]) for line in children.ledger.read_text().splitlines())
    assert bodies == Counter({("shared", "0"): 1, ("shared", "1"): 1, ("shared", "2"): 1}), bodies
    assert run.status is RunStatus.COMPLETED
    assert run.epoch == 1 and run.recoveries == 0, "never taken over"
    logs = "\n".join(children.log(w) for w in workers)
    assert "taken over" not in logs, logs
    for worker in workers:
        assert worker.poll() is None, children.log(worker)
