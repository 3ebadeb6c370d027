"""A worker killed around a continue-as-new hand-over, on SQLite and PostgreSQL.

A six-run chain (`tests.chaos.continue_app.chain`) runs on a worker armed with one
fault at its third hand-over: killed (kill -9 at that line) just before the commit
that makes the run CONTINUED and queues its successor, just after it, or with the
commit's acknowledgement lost. A clean worker takes over. Nothing may be lost and no
link may fork: exactly one run per link, each with its one step, the chain's result
right, and a task body run again only where the crash fell before its result was
committed (its result goes with the hand-over).
"""

from __future__ import annotations

import json
import subprocess

import pytest

import durable
from durable import RunStatus
from durable.core.records import RunQuery
from tests.chaos.continue_app import chain
from tests.chaos.test_fault_points import finish, stop
from tests.e2e.checker import read_ledger
from tests.e2e.harness import Children

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
LINKS = 6
BASE = "chain-c"
IDS = [BASE] + [f"{BASE}~{n}" for n in range(1, LINKS)]

#: (point, action, bodies run twice)
CASES = [
    ("before_continue", "exit", 1),
    ("after_continue", "exit", 0),
    ("continue_lost_ack", "raise", 0),
]


def worker(children: Children, faults: str = "") -> subprocess.Popen[str]:
    """A worker of tests.chaos.continue_app, with the fault-point tests' options."""
    command = ["-m", "durable", "worker", "tests.chaos.continue_app", "--db", children.url]
    options = ["--concurrency", "1", "--lease", "5", "--log-level", "INFO"]
    return children.spawn([*command, *options], DURABLE_FAULTS=faults)


@pytest.mark.parametrize("url", SQL, indirect=True)
@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_crash_around_a_hand_over(children: Children, url: str, case: tuple[str, str, int]) -> None:
    """Killed (or its acknowledgement lost) at the third hand-over, the chain still
    ends with one run per link and the right result, nothing lost."""
    point, action, repeats = case
    with durable.Engine(url) as engine:
        engine.dispatch_call(chain.bind(0, LINKS), run_id=BASE)
    fault = json.dumps([{"point": point, "action": action, "match": "workflow:", "nth": 3}])
    first = worker(children, fault)
    killed: list[int] = []
    if action == "exit":
        assert first.wait(60) == 137, f"the fault did not fire:\n{children.log(first)}"
        killed.append(first.pid)
        second = worker(children)
        last = finish(url, IDS[-1])
        stop(children, second)
    else:
        last = finish(url, IDS[-1])
        stop(children, first)
    assert f"fault injected: {point}" in children.log(first), "the fault never fired"
    with durable.Engine(url) as engine:
        assert last.status is RunStatus.COMPLETED and engine.outcome(last) == LINKS
        stored = sorted(run.id for run in engine.backend.list_runs(RunQuery(), limit=100))
        assert stored == sorted(IDS), f"one run per link, no fork: {stored}"
        for i, run_id in enumerate(IDS):
            run = engine.reread(run_id)
            assert run.status is (RunStatus.COMPLETED if i == LINKS - 1 else RunStatus.CONTINUED)
            history = engine.backend.load_history(run_id)
            steps = [(s.position, engine.load(s.output or b"", run_id, 0)) for s in history]
            assert steps == [(0, i + 1)], f"{run_id}: {steps}"
    bodies = read_ledger(children.ledger)
    counts = {run_id: sum(1 for b in bodies if b.run_id == run_id) for run_id in IDS}
    twice = [run_id for run_id, count in counts.items() if count == 2]
    assert all(count in (1, 2) for count in counts.values()), counts
    assert len(twice) == repeats, counts
    for run_id in twice:  # only in the process that died, before its result committed
        assert next(b.pid for b in bodies if b.run_id == run_id) in killed, bodies
