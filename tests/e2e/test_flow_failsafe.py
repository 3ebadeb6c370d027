"""Seed 001's fail-safe engine: a `durable flow run` engine is SIGKILLed while three
commands run; one of them ends while no engine lives. The next engine adopts the two
still running (by pid and start time), records the one that ended from its exit file,
and starts none of them again (the ledger), then goes on with what depended on them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import durable
import durable.flows
from tests.e2e.flow_ledger import TICK, Ledger
from tests.e2e.harness import Children

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("url", SQL, indirect=True)]


def wait_until(condition: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def engine_process(children: Children, path: Path, state: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "durable", "flow", "run", str(path), "--id", "fs-1"]
    return children.command([*argv, "--db", children.url], DURABLE_FLOW_DIR=str(state))


def test_commands_outlive_a_killed_engine_and_the_next_one_adopts_them(
    children: Children, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path)
    dag = {"long1": (), "long2": (), "short": (), "after": ("long1", "long2", "short")}
    seconds = {"long1": 4.0, "long2": 4.0, "short": 1.0, "after": 0.0}
    path = ledger.flow("failsafe", [ledger.task(n, seconds[n], d) for n, d in dag.items()], 3)
    state = tmp_path / "state"

    first = engine_process(children, path, state)
    wait_until(lambda: len(ledger.starts()) == 3, "three commands to start")
    children.kill(first)  # SIGKILL: the engine only; its commands are in sessions of their own
    killed_at = time.time_ns()
    ended = {task: ns for kind, task, ns, _ in ledger.lines() if kind == "end"}
    assert not ended, f"a command ended before the engine was killed: {ended}"
    wait_until(
        lambda: any(k == "end" and t == "short" for k, t, _, _ in ledger.lines()),
        "the short command to end while no engine lives",
    )
    assert not any(k == "end" and t.startswith("long") for k, t, _, _ in ledger.lines())

    second = engine_process(children, path, state)
    out, _ = second.communicate(timeout=90)
    assert second.returncode == 0, f"{out}\n{children.log(second)}"
    assert "flow fs-1 completed" in out

    assert ledger.starts() == {"long1": 1, "long2": 1, "short": 1, "after": 1}
    ledger.check_order(dag)
    short_end = next(ns for k, t, ns, _ in ledger.lines() if k == "end" and t == "short")
    assert short_end > killed_at  # it really ended while no engine lived
    with durable.Engine(children.url) as engine:
        view = durable.flows.view("fs-1", engine=engine)
    tasks = {task["name"]: task for task in view["tasks"]}
    assert {n: (t["status"], t["exit_code"], t["launches"]) for n, t in tasks.items()} == {
        "long1": ("finished", 0, 1),
        "long2": ("finished", 0, 1),
        "short": ("finished", 0, 1),
        "after": ("finished", 0, 1),
    }
    assert tasks["long1"]["duration"] >= 4.0 - TICK  # the same process, watched to its end
