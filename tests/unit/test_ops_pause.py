"""`Operations.pause` and `Operations.resume`: what the CLI, the REST API and the
dashboard call, on the memory backend with a virtual clock (`DurableEnv`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable import task, wait, workflow
from durable.core.records import RunQuery
from durable.ops import BadRequest, Conflict, NotFound, Operations
from durable.testing import DurableEnv

HOUR = dt.timedelta(hours=1)
done: list[str] = []
#: What `inside` does from its task body, as an operator would meanwhile: "pause", or
#: "pause+resume" (asks, then changes its mind); the answers go to `seen`.
inside: dict[str, str] = {}
seen: list[dict[str, Any]] = []
#: Which task `drifting` calls first: flipped to play a code change under a live run.
variant = ["a"]


@pytest.fixture(autouse=True)
def _clean() -> None:
    done.clear()
    inside.clear()
    seen.clear()
    variant[0] = "a"


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as environment:
        yield environment


@pytest.fixture
def ops(env: DurableEnv) -> Operations:
    return Operations(env.engine)


@task
def step(name: str) -> str:
    done.append(name)
    return name


@task
def operated(run_id: str) -> str:
    """Runs while an operator pauses its run (and maybe resumes it) from outside."""
    ops = Operations(durable.get_engine())
    if "pause" in inside.get(run_id, ""):
        seen.append(ops.pause(run_id, actor="ann"))
    if "resume" in inside.get(run_id, ""):
        seen.append(ops.resume(run_id, actor="bob"))
    done.append("operated")
    return "operated"


@workflow
def approval(order: str) -> object:
    step("prepare")
    answer = wait("approved", timeout=dt.timedelta(days=3))
    step("ship")
    return {"order": order, "answer": answer}


@workflow
def busy(run_id: str) -> list[str]:
    return [step("one"), operated(run_id), step("two")]


@workflow
def sleeper() -> str:
    wait(HOUR)
    return step("woke")


@workflow
def parent() -> list[str]:
    child = durable.dispatch(sleeper)
    return [child.result(), step("parent")]


@workflow(timeout=60)
def slow() -> str:
    wait(HOUR)
    return "done"


@workflow
def failing() -> None:
    raise ValueError("boom")


@workflow
def drifting() -> str:
    first = step("a") if variant[0] == "a" else step("b")
    wait("go")
    return first


def logged(ops: Operations, run_id: str) -> list[tuple[str, str | None, Any]]:
    return [(a["action"], a["actor"], a["detail"]) for a in ops.actions(run_id)]


def test_pause_and_resume_a_waiting_run(env: DurableEnv, ops: Operations) -> None:
    """A waiting run is paused at once; an event sent meanwhile waits for the resume;
    both acts are recorded with who did them and the status before."""
    env.dispatch(approval, "o-1", id="w-1")
    assert ops.get_run("w-1")["status"] == "waiting"
    paused = ops.pause("w-1", actor="alice")
    assert (paused["id"], paused["status"], paused["pause_requested"]) == ("w-1", "paused", False)
    assert [run["id"] for run in ops.list_runs(status=["paused"])["items"]] == ["w-1"]
    env.send("w-1", "approved", {"by": "carol"})
    assert ops.get_run("w-1")["status"] == "paused" and done == ["prepare"]
    assert ops.get_run("w-1")["waiting"]["event"] == "approved"  # what it waits for is kept

    resumed = ops.resume("w-1", actor="bob")
    assert resumed["status"] == "queued"
    env.drain()
    run = ops.get_run("w-1")
    assert run["status"] == "completed" and done == ["prepare", "ship"]
    assert run["output"] == {"order": "o-1", "answer": {"by": "carol"}}
    assert logged(ops, "w-1") == [
        ("pause", "alice", {"status_before": "waiting"}),
        ("resume", "bob", {"status_before": "paused"}),
    ]


def test_pausing_a_paused_run_changes_nothing(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(approval, "o-1", id="w-2")
    ops.pause("w-2")
    again = ops.pause("w-2", actor="alice")
    assert again["status"] == "paused"
    assert [(a, who) for a, who, _ in logged(ops, "w-2")] == [("pause", None), ("pause", "alice")]
    assert logged(ops, "w-2")[1][2] == {"status_before": "paused"}


def test_a_queued_run_pauses_before_it_starts(env: DurableEnv, ops: Operations) -> None:
    durable.dispatch(sleeper, id="q-1")
    assert ops.pause("q-1")["status"] == "paused"
    env.run_until_idle()
    assert ops.get_run("q-1")["status"] == "paused" and done == []  # never claimed
    ops.resume("q-1")
    env.run_until_idle()
    assert ops.get_run("q-1")["status"] == "completed" and done == ["woke"]


def test_a_running_run_is_asked_and_stops_at_its_next_durable_call(
    env: DurableEnv, ops: Operations
) -> None:
    """Paused from outside while a task runs: pause_requested, still running; the task
    finishes and the run parks before its next call."""
    inside["r-1"] = "pause"
    env.dispatch(busy, "r-1", id="r-1")
    [asked] = seen
    assert (asked["status"], asked["pause_requested"]) == ("running", True)
    run = ops.get_run("r-1")
    assert (run["status"], run["pause_requested"]) == ("paused", False)
    assert done == ["one", "operated"]
    assert logged(ops, "r-1") == [("pause", "ann", {"status_before": "running"})]
    ops.resume("r-1")
    env.drain()
    assert ops.get_run("r-1")["output"] == ["one", "operated", "two"]


def test_resuming_a_run_asked_to_pause_withdraws_the_request(
    env: DurableEnv, ops: Operations
) -> None:
    inside["r-2"] = "pause+resume"
    env.dispatch(busy, "r-2", id="r-2")
    asked, withdrawn = seen
    assert asked["pause_requested"] is True
    assert (withdrawn["status"], withdrawn["pause_requested"]) == ("running", False)
    assert ops.get_run("r-2")["status"] == "completed"  # it never paused
    assert logged(ops, "r-2") == [
        ("pause", "ann", {"status_before": "running"}),
        ("resume", "bob", {"status_before": "running"}),
    ]


def test_children_pause_and_resume_with_their_parent(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(parent, id="family")
    [child] = [r.id for r in env.backend.list_runs(RunQuery(parent_id="family"), limit=5)]
    ops.pause("family", actor="alice")
    assert ops.get_run(child)["status"] == "paused"
    assert {run["id"] for run in ops.list_runs(status=["paused"])["items"]} == {"family", child}
    env.advance(2 * HOUR)
    assert ops.get_run(child)["status"] == "paused"
    ops.resume("family", actor="alice")
    env.run_until_idle()
    assert ops.get_run("family")["output"] == ["woke", "parent"]
    assert ops.actions(child) == []  # recorded on the run the operator acted on


def test_a_cancelled_run_is_resumed_from_where_it_was_cancelled(
    env: DurableEnv, ops: Operations
) -> None:
    env.dispatch(approval, "o-1", id="c-1")
    ops.cancel("c-1", actor="alice")
    with pytest.raises(Conflict) as refused:
        ops.pause("c-1")
    assert str(refused.value) == "Run 'c-1' is being cancelled (queued); it cannot be paused."
    with pytest.raises(Conflict, match="It is being cancelled: resume it once it is cancelled"):
        ops.resume("c-1")
    env.drain()
    assert ops.get_run("c-1")["status"] == "cancelled"
    resumed = ops.resume("c-1", actor="bob")
    assert (resumed["status"], resumed["cancel_requested"]) == ("queued", False)
    env.drain()
    assert ops.get_run("c-1")["status"] == "waiting"
    env.send("c-1", "approved", "yes")
    assert ops.get_run("c-1")["output"] == {"order": "o-1", "answer": "yes"}
    assert done == ["prepare", "ship"]  # prepare was not run again
    assert [(a, who, d["status_before"]) for a, who, d in logged(ops, "c-1")] == [
        ("cancel", "alice", "waiting"),
        ("resume", "bob", "cancelled"),
    ]


@pytest.mark.parametrize("kind", ["completed", "failed", "timed_out"])
def test_a_finished_run_cannot_be_paused(env: DurableEnv, ops: Operations, kind: str) -> None:
    _run_in(env, kind, "f-1")
    with pytest.raises(Conflict) as refused:
        ops.pause("f-1", actor="alice")
    assert str(refused.value) == (
        f"Run 'f-1' has already finished ({kind}); there is nothing to pause."
    )
    assert refused.value.status == 409 and refused.value.exit_code == 4
    assert ops.get_run("f-1")["status"] == kind and ops.actions("f-1") == []


@pytest.mark.parametrize(
    ("kind", "hint"),
    [
        ("completed", "It has completed; there is nothing to resume."),
        ("failed", "Retry it instead, to run it again from its failure."),
        ("timed_out", "Its deadline has passed: start a new run instead."),
        ("waiting", "It is not paused: there is nothing to resume."),
    ],
)
def test_only_paused_and_cancelled_runs_can_be_resumed(
    env: DurableEnv, ops: Operations, kind: str, hint: str
) -> None:
    _run_in(env, kind, "n-1")
    with pytest.raises(Conflict) as refused:
        ops.resume("n-1", actor="alice")
    assert str(refused.value) == (
        f"Run 'n-1' is {kind}; only paused runs (and cancelled ones) can be resumed. {hint}"
    )
    assert ops.get_run("n-1")["status"] == kind and ops.actions("n-1") == []


def test_a_blocked_run_cannot_be_paused(env: DurableEnv, ops: Operations) -> None:
    """A run whose code no longer matches its history is BLOCKED: nothing to pause."""
    env.dispatch(drifting, id="b-1")
    variant[0] = "b"
    env.send("b-1", "go")
    assert ops.get_run("b-1")["status"] == "blocked"
    with pytest.raises(Conflict, match=r"is blocked .* fix its code"):
        ops.pause("b-1")
    with pytest.raises(Conflict, match="is blocked; only paused runs"):
        ops.resume("b-1")
    assert ops.get_run("b-1")["status"] == "blocked" and ops.actions("b-1") == []


def test_unknown_and_unstorable_ids(ops: Operations) -> None:
    for act in (ops.pause, ops.resume):
        with pytest.raises(NotFound, match="No run has the id 'nope'"):
            act("nope")
        with pytest.raises(BadRequest):
            act("a\x00b")


def _run_in(env: DurableEnv, kind: str, run_id: str) -> None:
    """Leave run *run_id* in status *kind* (completed, failed, timed_out, waiting)."""
    if kind == "completed":
        env.execute(sleeper, id=run_id)
    elif kind == "failed":
        with pytest.raises(ValueError, match="boom"):
            env.execute(failing, id=run_id)
    elif kind == "timed_out":
        env.dispatch(slow, id=run_id)
        env.advance(dt.timedelta(minutes=2))
    else:
        env.dispatch(approval, "o", id=run_id)
    assert env.run(run_id).status == kind
