"""An async workflow that gathers multi-step branches, replayed by a `durable worker`.

Its branches interleave at their awaits, and the second branch's steps finish first;
the wait after the gather suspends the run, so the worker replays it from the history.
It used to end blocked with NondeterminismError on every replay.
"""

from __future__ import annotations

import pytest

import durable
from durable import RunStatus, StepKind
from tests.e2e.harness import Children
from tests.e2e.test_cancel_on_workers import bodies, start_worker
from tests.e2e.test_workers import stop_all
from tests.e2e.worker_command_app import gathering

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("url", SQL, indirect=True)]


def test_gathered_branches_replay_in_a_worker(children: Children, engine: durable.Engine) -> None:
    """The run suspends after the gather, is replayed, and completes; each step ran once."""
    handle = durable.dispatch(gathering, id="gathering")
    worker = start_worker(children)
    assert handle.result(timeout=30) == 433
    assert handle.status() is RunStatus.COMPLETED
    kinds = [step.kind for step in engine.backend.load_history("gathering")]
    assert kinds == [StepKind.TASK] * 4 + [StepKind.SLEEP]
    assert bodies(children) == {("gathering", p): 1 for p in range(4)}, "no step ran twice"
    stop_all(children, [worker])
