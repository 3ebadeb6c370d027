"""Real processes killed with SIGKILL, and two recoverers racing for one run."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

import durable
from durable import NondeterminismError, RunStatus
from durable.core.records import StepStatus
from tests.e2e.harness import Children

COMPLETED = StepStatus.COMPLETED

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.e2e


def stored(url: str, run_id: str) -> tuple[durable.Run, list[durable.Step], object]:
    """The run, its history and its decoded result, read by a fresh engine."""
    with durable.Engine(url) as engine:
        run = engine.backend.get_run(run_id)
        assert run is not None
        history = list(engine.backend.load_history(run_id))
        result = engine.load(run.output, run_id, None) if run.output else None
    return run, history, result


@pytest.mark.parametrize("url", SQL, indirect=True)
@pytest.mark.parametrize("resume_by", ["recover", "execute"])
def test_sigkill_between_tasks_then_resume(children: Children, url: str, resume_by: str) -> None:
    """Killed between task 2 and 3, the run resumes; no finished task body runs again."""
    victim = children.start("run", url, "crash-1", DURABLE_TEST_PAUSE="between")
    children.wait_for_pause("between")
    children.kill(victim)
    assert children.bodies() == Counter({("crash-1", 0): 1, ("crash-1", 1): 1})
    run, history, _ = stored(url, "crash-1")
    assert run.status is RunStatus.RUNNING, "a killed run is left running, to be recovered"
    assert [s.status for s in history] == [COMPLETED, COMPLETED, StepStatus.RUNNING]

    if resume_by == "recover":
        survivor = children.start("recover", url)
        assert children.finish(survivor) == ["crash-1"]
    else:
        survivor = children.start("run", url, "crash-1")
        children.finish(survivor)

    assert children.bodies() == Counter({("crash-1", 0): 1, ("crash-1", 1): 1, ("crash-1", 2): 1})
    run, history, result = stored(url, "crash-1")
    assert run.status is RunStatus.COMPLETED
    assert result == [
        {"i": 1, "pid": victim.pid},
        {"i": 2, "pid": victim.pid},
        {"i": 3, "pid": survivor.pid},
    ], "tasks 1 and 2 were replayed from the victim's records, task 3 ran in the survivor"
    assert [step.epoch for step in history] == [1, 1, 2]


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_sigkill_in_workflow_code_reruns_the_task_just_returned(
    children: Children, url: str
) -> None:
    """Killed in the workflow code after task 2 returned: task 2's result goes with task
    3's start, so it was not committed, and task 2 runs again; task 1 does not."""
    victim = children.start("run", url, "window", DURABLE_TEST_PAUSE="in-workflow")
    children.wait_for_pause("in-workflow")
    children.kill(victim)
    _, history, _ = stored(url, "window")
    assert [s.status for s in history] == [COMPLETED, StepStatus.RUNNING]
    survivor = children.start("recover", url)
    assert children.finish(survivor) == ["window"]
    assert children.bodies() == Counter({("window", 0): 1, ("window", 1): 2, ("window", 2): 1})
    run, history, result = stored(url, "window")
    assert run.status is RunStatus.COMPLETED
    assert [entry["pid"] for entry in result] == [victim.pid, survivor.pid, survivor.pid]  # type: ignore[attr-defined]
    assert [(s.attempts, s.epoch) for s in history] == [(1, 1), (1, 2), (1, 2)]


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_changed_code_at_a_task_killed_in_flight_is_caught(
    children: Children, url: str, tmp_path: Path
) -> None:
    """Killed inside task 2; the code then calls `other` at position 1: resuming blocks
    the run with a NondeterminismError naming the position and both calls, and `other`
    never runs. Reverted, the run completes; task 2 ran twice (killed, then again)."""
    victim = children.start("run", url, "changed", DURABLE_TEST_PAUSE="in-step-2")
    children.wait_for_pause("in-step-2")
    children.kill(victim)
    changed = children.start("recover", url, DURABLE_TEST_CODE="changed")
    assert children.finish(changed) == ["changed"]
    run, history, _ = stored(url, "changed")
    assert run.status is RunStatus.BLOCKED
    with durable.Engine(url) as engine, pytest.raises(NondeterminismError) as caught:
        engine.outcome(run)
    message = str(caught.value)
    assert "at position 1" in message, message
    assert "now calls task __main__.other" in message, message  # the app runs as __main__
    assert "history recorded task __main__.step" in message, message
    assert [s.status for s in history] == [COMPLETED, StepStatus.RUNNING], "nothing overwritten"
    markers = Path(children.markers)
    assert not list(markers.glob("other-ran.*")), "the new call never ran"

    reverted = children.start("recover", url)
    assert children.finish(reverted) == ["changed"]
    run, history, result = stored(url, "changed")
    assert run.status is RunStatus.COMPLETED
    assert [entry["pid"] for entry in result] == [victim.pid, reverted.pid, reverted.pid]  # type: ignore[attr-defined]
    assert children.bodies() == Counter({("changed", 0): 1, ("changed", 1): 2, ("changed", 2): 1})
    assert not list(markers.glob("other-ran.*"))


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_sigkill_inside_a_task_reruns_only_that_task(children: Children, url: str) -> None:
    """Killed inside task 2's body, only task 2 runs again (at least once, never after commit)."""
    victim = children.start("run", url, "crash-2", DURABLE_TEST_PAUSE="in-step-2")
    children.wait_for_pause("in-step-2")
    children.kill(victim)
    survivor = children.start("recover", url)
    assert children.finish(survivor) == ["crash-2"]
    assert children.bodies() == Counter({("crash-2", 0): 1, ("crash-2", 1): 2, ("crash-2", 2): 1})
    run, _, result = stored(url, "crash-2")
    assert run.status is RunStatus.COMPLETED
    assert [entry["pid"] for entry in result] == [victim.pid, survivor.pid, survivor.pid]  # type: ignore[attr-defined]


@pytest.mark.chaos
@pytest.mark.parametrize("url", SQL, indirect=True)
def test_two_recoverers_race_and_the_fence_rejects_the_loser(
    children: Children, url: str, tmp_path: Path
) -> None:
    """Two recover() calls race: one owns the run. A frozen owner's late write is fenced off."""
    victim = children.start("run", url, "race", DURABLE_TEST_PAUSE="between")
    children.wait_for_pause("between")
    children.kill(victim)

    go = tmp_path / "go"
    racers = [
        children.start(
            "recover",
            url,
            DURABLE_TEST_PAUSE="in-step-3",
            DURABLE_TEST_LEASE="1",
            DURABLE_TEST_START=str(go),
        )
        for _ in range(2)
    ]
    go.touch()
    winner_pid = children.wait_for_pause("in-step-3")
    winner = next(p for p in racers if p.pid == winner_pid)
    loser = next(p for p in racers if p.pid != winner_pid)
    assert children.finish(loser) == [], "exactly one recoverer may own the run"

    # Freeze the owner inside task 3 until its lease (1 s) has run out: a zombie.
    children.kill(winner, signal.SIGSTOP)
    time.sleep(2.5)
    taker = children.start("recover", url)
    assert children.finish(taker) == ["race"]
    children.release("in-step-3", winner_pid)
    children.kill(winner, signal.SIGCONT)
    assert children.finish(winner) == ["race"]
    assert "lease lost" in children.log(winner)

    run, history, result = stored(url, "race")
    assert run.status is RunStatus.COMPLETED
    assert run.epoch == 3, "victim, winner and taker each owned the run in turn"
    assert [step.epoch for step in history] == [1, 1, 3], "the zombie's write was rejected"
    assert result[2] == {"i": 3, "pid": taker.pid}  # type: ignore[index]
    bodies = children.bodies()
    assert bodies[("race", 0)] == bodies[("race", 1)] == 1
    assert bodies[("race", 2)] == 2, "task 3 ran in the zombie and in the taker; one result counts"
