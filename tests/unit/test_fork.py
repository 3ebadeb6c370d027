"""Forking a run from a position (issue 17), on memory with a virtual clock.

A fork is a new run of the same call whose history starts as a copy of the original's
finished steps below the position: those bodies never run again, the rest runs with
today's code, and the original is not changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta

import pytest

import durable
from durable import RunStatus, StepKind, StepStatus, task, wait, workflow
from durable.core.records import Run, Step
from durable.errors import ConfigurationError, IdempotencyConflict, RunNotFound
from durable.testing import DurableEnv

ran: list[str] = []
broken = {"charge": True}


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    ran.clear()
    broken["charge"] = True
    with DurableEnv() as world:
        yield world


@task
def step(name: str) -> str:
    ran.append(name)
    return f"{name}!"


@task
def charge(order: str) -> str:
    ran.append("charge")
    if broken["charge"]:
        raise RuntimeError("card declined by a bug")
    return f"charged {order}"


@workflow
def pipeline() -> list[str]:
    return [step("a"), step("b"), step("c")]


@workflow
def checkout(order: str) -> str:
    step("reserve")
    return charge(order)


@workflow
def fan() -> list[str]:
    first = step("a")
    both = durable.execute(step.bind("b"), step.bind("c"))
    return [first, *both, step("d")]


@workflow
def child() -> str:
    return step("in-child")


@workflow
def parent() -> list[str]:
    late = durable.dispatch(child)
    return [child(), late.result(), step("after")]


@workflow
def approval() -> str:
    step("ask")
    answer = wait("approved", timeout=timedelta(days=1))
    return step(f"go-{answer}")


@workflow
def cancelled_later() -> str:
    step("a")
    wait(timedelta(hours=1))
    return step("b")


def _rows(run_id: str, env: DurableEnv) -> list[Step]:
    return list(env.engine.backend.load_history(run_id))


def _snapshot(run_id: str, env: DurableEnv) -> tuple[Run, list[Step]]:
    return env.run(run_id), _rows(run_id, env)


def test_copied_positions_are_identical_and_their_bodies_never_run(env: DurableEnv) -> None:
    """The fork's steps below the position equal the original's (but for the run id),
    only the positions from it run again, and the original is unchanged."""
    original = durable.dispatch(pipeline)
    env.drain()
    before = _snapshot(original.id, env)
    ran.clear()
    forked = original.fork(2)
    assert forked.run().origin == original.id and forked.status() is RunStatus.QUEUED
    env.drain()
    assert forked.result() == ["a!", "b!", "c!"]
    assert ran == ["c"], "only position 2 ran again"
    copied, theirs = _rows(forked.id, env)[:2], before[1][:2]
    assert copied == [dataclasses.replace(s, run_id=forked.id) for s in theirs]
    assert _snapshot(original.id, env) == before, "the original is untouched"
    same = forked.run()
    assert (same.workflow, same.input, same.call_hash) == (
        before[0].workflow,
        before[0].input,
        before[0].call_hash,
    )


def test_a_fork_of_a_fork_and_a_fork_from_zero(env: DurableEnv) -> None:
    """A fork can be forked (its origin is the fork); from 0 everything runs again."""
    original = durable.dispatch(pipeline)
    env.drain()
    first = durable.fork(original.id, from_position=3)
    env.drain()
    second = first.fork(1, id="second")
    ran.clear()
    env.drain()
    assert second.id == "second" and second.run().origin == first.id
    assert second.result() == ["a!", "b!", "c!"] and ran == ["b", "c"]
    again = original.fork(0)
    ran.clear()
    env.drain()
    assert again.result() == ["a!", "b!", "c!"] and ran == ["a", "b", "c"]
    assert [s.run_id for s in _rows(again.id, env)] == [again.id] * 3


def test_a_failed_run_forked_from_its_failed_step_completes_with_fixed_code(
    env: DurableEnv,
) -> None:
    """Fail, fix, fork: the steps before the failure are kept, the failed one runs again."""
    original = durable.dispatch(checkout, "o-1")
    env.drain()
    assert original.status() is RunStatus.FAILED
    failed = [s.position for s in _rows(original.id, env) if s.status is StepStatus.FAILED]
    assert failed == [1]
    broken["charge"] = False  # the fix is deployed
    ran.clear()
    forked = original.fork(1)
    env.drain()
    assert forked.result() == "charged o-1" and ran == ["charge"]
    assert original.status() is RunStatus.FAILED


def test_a_running_run_is_forked_with_what_it_finished(env: DurableEnv) -> None:
    """A waiting run's fork copies its finished steps, not the wait in progress; the
    fork waits on its own, and takes its own events."""
    original = durable.dispatch(approval)
    env.drain()
    assert original.status() is RunStatus.WAITING
    assert [s.status for s in _rows(original.id, env)] == [
        StepStatus.COMPLETED,
        StepStatus.WAITING,
    ]
    ran.clear()
    forked = original.fork(2)
    env.drain()
    assert [s.position for s in _rows(forked.id, env)] == [0, 1] and ran == []
    assert forked.status() is RunStatus.WAITING
    env.send(forked.id, "approved", "yes")
    env.drain()
    assert forked.result() == "go-yes!"
    assert original.status() is RunStatus.WAITING, "the original still waits"


def test_what_copies_of_child_dispatch_and_event_steps_mean(env: DurableEnv) -> None:
    """A copied child step keeps the child's outcome, a copied dispatch keeps the
    original's child id (the fork joins that child), a copied event keeps its payload."""
    original = durable.dispatch(parent)
    env.drain()
    kinds = [s.kind for s in _rows(original.id, env)]
    assert kinds[:3] == [StepKind.DISPATCH, StepKind.WORKFLOW, StepKind.JOIN]
    ran.clear()
    forked = original.fork(3)
    env.drain()
    assert forked.result() == ["in-child!", "in-child!", "after!"] and ran == ["after"]
    rows = _rows(forked.id, env)
    assert env.engine.load(rows[0].output or b"", forked.id, 0) == f"{original.id}/0"
    assert env.engine.backend.get_run(f"{forked.id}/1") is None, "no child ran again"

    waited = durable.dispatch(approval)
    env.drain()
    env.send(waited.id, "approved", "yes")
    env.drain()
    ran.clear()
    again = waited.fork(2)
    env.drain()
    assert again.result() == "go-yes!" and ran == ["go-yes"]
    assert list(env.engine.backend.events(again.id)) == [], "the event itself stays"


def test_group_boundaries_are_fine_and_inside_a_group_is_refused(env: DurableEnv) -> None:
    """From a parallel group's first position or the one after it: fine; inside it: a
    ValueError naming both."""
    original = durable.dispatch(fan)
    env.drain()
    with pytest.raises(ValueError, match=r"positions 1 to 2 are one parallel group.*from 1.*or 3"):
        original.fork(2)
    for position in (1, 3):
        ran.clear()
        forked = original.fork(position)
        env.drain()
        assert forked.result() == ["a!", "b!", "c!", "d!"]
        # b and c run in parallel, in either order; d after both.
        assert sorted(ran[:-1]) == (["b", "c"] if position == 1 else []) and ran[-1] == "d"


def test_bad_positions_and_ids_are_refused_naming_what_is_valid(env: DurableEnv) -> None:
    """Negative, beyond the end, not an int, an unknown run, a taken id: clear errors,
    nothing created."""
    original = durable.dispatch(pipeline)
    env.drain()
    before = len(env.engine.backend.list_runs(durable.core.records.RunQuery(), limit=100))
    with pytest.raises(ValueError, match=r"positions 0 to 2, so a fork starts from 0 to 3"):
        original.fork(-1)
    with pytest.raises(ValueError, match=r"from 0 to 3"):
        original.fork(4)
    with pytest.raises(TypeError, match="must be an int"):
        original.fork("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an int"):
        original.fork(True)
    with pytest.raises(RunNotFound, match="nope"):
        durable.fork("nope", from_position=0)
    with pytest.raises(IdempotencyConflict, match=f"{original.id!r} already exists"):
        original.fork(1, id=original.id)
    with pytest.raises(ValueError, match="child run"):
        original.fork(1, id="x/3")
    after = len(env.engine.backend.list_runs(durable.core.records.RunQuery(), limit=100))
    assert after == before, "nothing was created"


def test_a_cancel_marker_below_the_position_is_refused(env: DurableEnv) -> None:
    """A fork past where a cancellation reached the code is refused, naming the
    marker's position; from it or before is fine."""
    original = durable.dispatch(cancelled_later)
    env.drain()
    original.cancel()
    env.drain()
    assert original.status() is RunStatus.CANCELLED
    rows = _rows(original.id, env)
    marker = next(s.position for s in rows if s.kind is StepKind.CANCEL)
    with pytest.raises(ValueError, match=f"position {marker} is where its cancellation"):
        original.fork(marker + 1)
    forked = original.fork(marker)
    env.drain()
    env.advance(timedelta(hours=1))
    assert forked.result() == "b!"


def test_a_workflow_not_registered_here_cannot_be_checked(env: DurableEnv) -> None:
    """Without the code, the groups cannot be known: ConfigurationError saying to import it."""
    original = durable.dispatch(pipeline)
    env.drain()
    backend = env.engine.backend
    stored = backend.get_run(original.id)
    assert stored is not None
    backend.create_run(
        durable.core.records.NewRun(
            id="ghost",
            workflow="gone.workflow",
            input=stored.input,
            call_hash=stored.call_hash,
            owner=None,
            lease=0,
        )
    )
    with pytest.raises(ConfigurationError, match=r"--import MODULE"):
        durable.fork("ghost", from_position=0)


def test_code_that_no_longer_replays_the_copied_part_is_refused(env: DurableEnv) -> None:
    """A fork whose copied steps today's code would diverge from is refused, naming
    where to fork from instead."""
    original = durable.dispatch(pipeline)
    env.drain()
    backend = env.engine.backend
    rows = _rows(original.id, env)
    bent = dataclasses.replace(rows[1], call_hash="v1:other", run_id="bent")
    stored = env.run(original.id)
    backend.create_run(
        durable.core.records.NewRun(
            id="bent",
            workflow=stored.workflow,
            input=stored.input,
            call_hash=stored.call_hash,
            owner="me",
            lease=30,
        )
    )
    backend.record(dataclasses.replace(rows[0], run_id="bent"), 1)
    backend.record(bent, 1)
    with pytest.raises(ValueError, match=r"diverged .* at position 1.*Fork from 1 or before"):
        durable.fork("bent", from_position=2)
    assert durable.fork("bent", from_position=1).run().origin == "bent"


def test_operations_map_each_refusal_to_its_status(env: DurableEnv) -> None:
    """Operations.fork: 400 for a bad position, 404 for an unknown run or a workflow not
    registered here, 409 for a taken id; a fork is recorded on both runs."""
    from durable.ops import BadRequest, Conflict, NotFound, Operations

    ops = Operations(env.engine)
    original = durable.dispatch(pipeline)
    env.drain()
    with pytest.raises(BadRequest, match="from 0 to 3"):
        ops.fork(original.id, 9)
    with pytest.raises(NotFound, match="nope"):
        ops.fork("nope", 0)
    with pytest.raises(Conflict, match="already exists"):
        ops.fork(original.id, 0, id=original.id)
    env.engine.backend.create_run(
        durable.core.records.NewRun(
            id="ghost", workflow="gone.flow", input=b"j[]", call_hash="v1:0", owner=None, lease=0
        )
    )
    with pytest.raises(NotFound, match="is registered in this process, so"):
        ops.fork("ghost", 0)
    answer = ops.fork(original.id, 1, id="copy", actor="ann")
    assert answer["run"]["origin"] == original.id and answer["from"] == 1
    assert [(a["action"], a["actor"], a["detail"]) for a in ops.actions(original.id)] == [
        ("fork", "ann", {"from": 1, "fork": "copy"})
    ]
    assert [(a["action"], a["detail"]) for a in ops.actions("copy")] == [
        ("fork", {"from": 1, "origin": original.id})
    ]


@task
async def later(name: str) -> str:
    ran.append(name)
    return f"{name}!"


@workflow
async def gathered() -> list[str]:
    import asyncio

    return list(await asyncio.gather(later("a"), later("b"), later("c")))


def test_gathered_async_calls_are_not_a_group(env: DurableEnv) -> None:
    """asyncio.gather'ed calls each take their own position: a fork between them keeps
    the first ones and runs the rest again."""
    original = durable.dispatch(gathered)
    env.drain()
    ran.clear()
    forked = original.fork(2)
    env.drain()
    assert forked.result() == ["a!", "b!", "c!"] and ran == ["c"]
