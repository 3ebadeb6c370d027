"""Every example runs, in a fresh working directory, and does what its docstring says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_hello(tmp_path: Path) -> None:
    """hello.py computes its pipeline on a SQLite file and replays it on a second run."""
    first = run_example("hello.py", tmp_path)
    assert "result: [30, 300, 31]" in first and "fetch(3) runs" in first
    assert "flaky(30) fails; it will be retried" in first and "2 attempt(s)" in first
    assert (tmp_path / "durable.db").exists(), "the embedded default is durable.db in the cwd"
    second = run_example("hello.py", tmp_path)
    assert "result: [30, 300, 31]" in second
    assert "runs" not in second.split("history:")[0].replace("pipeline", ""), "nothing re-ran"


def test_crash_and_resume(tmp_path: Path) -> None:
    """crash_and_resume.py dies inside task 3; the resumed run re-runs only task 3."""
    output = run_example("crash_and_resume.py", tmp_path)
    assert "child process exited with code 1" in output
    lines = [line.strip() for line in output.splitlines()]
    ran = [line for line in lines if line.startswith("task ") and " ran in process " in line]
    assert [line.split(" ran")[0] for line in ran] == ["task 1", "task 2", "task 3", "task 3"]
    child_pid = ran[0].rsplit(" ", 1)[1]
    assert all(line.endswith(child_pid) for line in ran[:3]) and not ran[3].endswith(child_pid)
    assert "result: ['result of task 1', 'result of task 2', 'result of task 3']" in output


def test_approval(tmp_path: Path) -> None:
    """approval.py: d1 times out and escalates, d2 gets its event; a rerun replays both."""
    first = run_example("approval.py", tmp_path)
    assert "d1: escalated" in first and "no answer for d1: escalated" in first
    assert "d2: approved" in first and "no answer for d2" not in first
    assert "history of approval-d1: ['task', 'event', 'task']" in first
    assert "history of approval-d2: ['task', 'event']" in first
    second = run_example("approval.py", tmp_path)
    assert "d1: escalated" in second and "d2: approved" in second
    assert "review requested" not in second, "finished runs return their stored results"


def test_tracing(tmp_path: Path) -> None:
    """tracing.py: the run's span under the request's, its attempts under the run's (the
    failed one ERROR), and log lines that name the task and attempt."""
    output = run_example("tracing.py", tmp_path)
    assert "log: charging o-42, attempt 1 (task __main__.charge, attempt 1)" in output
    assert "log: charging o-42, attempt 2 (task __main__.charge, attempt 2)" in output
    tree = output.split("trace:\n", 1)[1].splitlines()
    assert tree == [
        "  POST /checkout UNSET",
        "    durable.run __main__.checkout completed OK",
        "      durable.task __main__.charge position 0 failed ERROR",
        "      durable.task __main__.charge position 0 completed OK",
        "      durable.task __main__.ship position 1 completed OK",
    ]


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.glob("*.py")))
def test_every_example_has_a_test(name: str) -> None:
    """No example goes untested: each file in examples/ has a test above."""
    assert f"test_{name.removesuffix('.py')}" in globals()


def test_web_app(tmp_path: Path) -> None:
    """web_app.py: a FastAPI handler dispatches one run per order id, a worker runs it,
    and the dashboard mounted at /durable logs in and lists it."""
    output = run_example("web_app.py", tmp_path)
    assert "as run checkout-o-7; placed again: run checkout-o-7" in output
    assert "result: receipt-o-7-1250" in output and "status: completed" in output
    assert "dashboard login: 303 to /durable/" in output
    assert "the dashboard's API lists: ['checkout-o-7']" in output


def test_outbox(tmp_path: Path) -> None:
    """outbox.py: the committed order gets its run, the rolled-back one neither; a
    Client starts a run by name; both complete; a rerun joins the stored runs."""
    for _ in range(2):
        output = run_example("outbox.py", tmp_path)
        assert "orders: ['o-1']" in output and "run for o-2: None" in output
        assert "o-1: o-1 shipped" in output and "o-3: o-3 shipped" in output
        assert "runs: ['fulfil-o-1', 'fulfil-o-3']" in output
