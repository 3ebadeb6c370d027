"""A crash at each fault point a process flow passes, on SQLite and PostgreSQL.

A `durable worker` armed with one fault (``DURABLE_FAULTS``) runs a small flow of real
commands writing a ledger (tests/e2e/flow_ledger.py): a, then b and c, then d. When the
fault kills it, a clean worker takes the flow over. Whatever the point (a claim, a
dispatch of a launch, the start or the end of a command's task, its result recorded
after the flow was told of it, the flow consuming that message, a lost
acknowledgement), the flow completes, every command ran exactly once (a command the
dead worker had started is adopted or its exit recorded, never started again), and
none started before what it depends on ended.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

import durable
import durable.flows
from durable import RunStatus
from tests.chaos.test_fault_points import finish
from tests.e2e.flow_ledger import Ledger
from tests.e2e.harness import Children

# Kills at fault points and checks what the runs end with, never how fast: these run
# on two pytest-xdist workers beside the other tests (scripts/check.py).
pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.untimed]

COMMAND = "durable.flow.command"
#: (point, action, match, nth): where a flow's worker dies (exit) or its write's
#: acknowledgement is lost (raise).
CASES = [
    ("after_claim", "exit", "fl-1/", 1),
    ("before_checkpoint", "exit", "dispatch:", 2),
    ("before_task", "exit", f"task:{COMMAND}", 2),
    ("after_task", "exit", f"task:{COMMAND}", 1),
    ("before_checkpoint", "exit", f"task:{COMMAND}", 3),
    ("before_checkpoint", "exit", "event:durable.flow", 2),
    ("before_complete", "exit", "durable.flow.node", 2),
    ("checkpoint_lost_ack", "raise", "dispatch:", 2),
    ("checkpoint_lost_ack", "raise", f"task:{COMMAND}", 3),
    ("checkpoint_lost_ack", "raise", "event:durable.flow", 2),
]
DAG = {"a": (), "b": ("a",), "c": ("a",), "d": ("b", "c")}


def worker(children: Children, state: Path, faults: str = "") -> subprocess.Popen[str]:
    command = ["-m", "durable", "worker", "--db", children.url, "--concurrency", "6"]
    options = ["--lease", "5", "--log-level", "INFO"]
    return children.spawn([*command, *options], DURABLE_FAULTS=faults, DURABLE_FLOW_DIR=str(state))


#: the cases run on PostgreSQL too: one of each kind of moment (the rest behave alike
#: on both backends, and each case costs a worker's life).
ON_POSTGRES = (0, 2, 3, 5, 8)


def name(case: tuple[str, str, str, int]) -> str:
    point, _, match, nth = case
    return f"{point}-{match.split(':')[0].rstrip('/')}-{nth}"


@pytest.mark.parametrize(
    ("url", "case"),
    [
        *(pytest.param("sqlite", case, id=f"{name(case)}-sqlite") for case in CASES),
        *(
            pytest.param(
                "postgres", CASES[i], id=f"{name(CASES[i])}-postgres", marks=pytest.mark.postgres
            )
            for i in ON_POSTGRES
        ),
    ],
    indirect=["url"],
)
def test_a_flow_survives_a_crash_at_each_fault_point(
    children: Children, url: str, tmp_path: Path, case: tuple[str, str, str, int]
) -> None:
    point, action, match, nth = case
    ledger = Ledger(tmp_path)
    path = ledger.flow("faults", [ledger.task(n, 0.3, deps) for n, deps in DAG.items()])
    with durable.Engine(url) as engine:
        durable.flows.start(path, id="fl-1", engine=engine)
    state = tmp_path / "state"
    fault = json.dumps([{"point": point, "action": action, "match": match, "nth": nth}])
    first = worker(children, state, fault)
    if action == "exit":
        assert first.wait(60) == 137, f"the fault did not fire:\n{children.log(first)}"
        second = worker(children, state)
        run = finish(url, "fl-1", timeout=90)
        second.send_signal(signal.SIGTERM)
        second.wait(30)
    else:
        run = finish(url, "fl-1", timeout=90)
        first.send_signal(signal.SIGTERM)
        first.wait(30)
    assert f"fault injected: {point}" in children.log(first), "the fault never fired"
    assert run.status is RunStatus.COMPLETED, (run, children.log(first))
    assert ledger.starts() == dict.fromkeys(DAG, 1), ledger.lines()
    ledger.check_order(DAG)
    with durable.Engine(url) as engine:
        view = durable.flows.view("fl-1", engine=engine)
    assert [(t["status"], t["exit_code"]) for t in view["tasks"]] == [("finished", 0)] * 4
