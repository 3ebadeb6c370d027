"""continue_as_new on the memory backend: the hand-over, following the chain, refusals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durable
from durable import RunStatus, StepStatus
from durable.core.chains import predecessor_id, successor_id
from durable.core.records import RunQuery
from durable.errors import DurableError, RunFinished, SerializationError
from durable.ops import Conflict, Operations
from durable.testing import DurableEnv
from tests.unit import continuing_app as app


@pytest.fixture(autouse=True)
def _clean() -> None:
    app.bodies.clear()


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as env:
        yield env


def test_chain_ids_are_a_pure_function_of_the_id() -> None:
    """B -> B~1 -> B~2; the predecessor is read back from the id."""
    assert successor_id("order-7") == "order-7~1"
    assert successor_id("order-7~1") == "order-7~2"
    assert successor_id("a~b~9") == "a~b~10"
    assert predecessor_id("order-7~2") == "order-7~1"
    assert predecessor_id("order-7~1") == "order-7"
    assert predecessor_id("order-7") is None


def test_a_chain_id_cannot_be_chosen() -> None:
    """A user id of a successor's form is refused with what to use instead."""
    with pytest.raises(ValueError, match=r"continue-as-new successor's id .*'order-3'"):
        durable.dispatch(app.counter, 0, 1, id="order~3")


def test_execute_follows_the_chain_and_each_run_keeps_one_iteration(
    memory_engine: durable.Engine,
) -> None:
    """execute returns the last run's result; every run holds one task, the one it ran,
    recorded with the hand-over; the links name each other."""
    assert durable.execute(app.counter, 0, 5, id="count") == 5
    chain = ["count", "count~1", "count~2", "count~3", "count~4"]
    assert app.bodies == [(run_id, i) for i, run_id in enumerate(chain)]
    for i, run_id in enumerate(chain):
        run = memory_engine.reread(run_id)
        want = RunStatus.COMPLETED if run_id == chain[-1] else RunStatus.CONTINUED
        assert run.status is want
        history = memory_engine.backend.load_history(run_id)
        assert [(s.position, s.status, s.output) for s in history] == [
            (0, StepStatus.COMPLETED, b"j%d" % (i + 1))
        ]
    assert memory_engine.backend.get_run("count~5") is None


def test_a_chain_of_ten_thousand_runs(memory_engine: durable.Engine) -> None:
    """10,000 hand-overs: no run's history grows past its one iteration (one step,
    every run checked), and the chain is followed to its end by execute and by a
    handle on its base id or on a run in the middle."""
    n = 10_000
    assert durable.execute(app.counter, 0, n, id="long") == n
    assert len(app.bodies) == n
    backend = memory_engine.backend
    for link in range(n):
        run_id = "long" if link == 0 else f"long~{link}"
        assert len(backend.load_history(run_id)) == 1, run_id
    assert backend.get_run(f"long~{n}") is None
    assert durable.get("long").result() == n
    assert durable.get("long~5000").result() == n


def test_handle_result_and_status_of_a_dispatched_chain(env: DurableEnv) -> None:
    """Handle.result() follows the chain; the handle's own run says continued."""
    handle = env.dispatch(app.counter, 0, 3, id="bg")
    assert handle.result() == 3
    assert handle.status() is RunStatus.CONTINUED
    assert env.run("bg~2").status is RunStatus.COMPLETED


def test_events_before_and_after_the_hand_over_reach_the_current_run(env: DurableEnv) -> None:
    """Events sent before a run hands over move to its successor, in order; events sent
    to an old id afterwards go to the current run; the chain sums them all."""
    handle = env.dispatch(app.accumulate, 0, 3, id="sum")
    env.backend.send_event("sum", "add", env.engine.dump(1, "an event"))
    env.backend.send_event("sum", "add", env.engine.dump(10, "an event"))
    env.drain()
    assert env.run("sum").status is RunStatus.CONTINUED
    moved = env.backend.events("sum~1")
    assert [e.consumed_position for e in moved] == [0], "the second event moved, consumed"
    assert env.run("sum~2").status is RunStatus.WAITING
    env.send("sum", "add", 100)  # the base id: delivered to sum~2
    assert handle.result() == 111
    assert [e.run_id for e in env.backend.events("sum~2")] == ["sum~2"]
    with pytest.raises(RunFinished):
        durable.send("sum~1", "add", 1)


def test_properties_go_with_each_hand_over(env: DurableEnv) -> None:
    """set_state's values are stored on each continued run, with its hand-over."""
    env.dispatch(app.accumulate, 5, 2, id="props")
    env.send("props", "add", 1)
    env.send("props", "add", 2)
    assert durable.get("props").state() == {"total": 5, "rounds": 2}
    assert durable.get("props~1").state() == {"total": 6, "rounds": 1}
    assert durable.get("props").result() == 8


def test_a_workflow_class_continues_as_new(env: DurableEnv) -> None:
    """A workflow class's run hands over to a new instance with the new arguments; its
    attributes are stored with each hand-over."""
    assert env.execute(app.Rounds, 2, id="rounds") == "done"
    assert app.bodies == [("rounds", 2), ("rounds~1", 1), ("rounds~2", 0)]
    assert env.run("rounds~1").status is RunStatus.CONTINUED
    assert durable.get("rounds~1").state() == {"left": 1}


def test_wait_for_a_handle_inside_a_workflow_follows_the_chain(env: DurableEnv) -> None:
    """wait(handle) in a workflow returns a finished chain's last result, and waits
    for the current run of a chain still going (the waiting names it)."""
    env.execute(app.counter, 0, 3, id="done")
    assert env.execute(app.waits_for, "done") == 3
    env.dispatch(app.accumulate, 0, 3, id="going")
    env.send("going", "add", 1)
    waiter = env.dispatch(app.waits_for, "going")
    assert env.run(waiter.id).waiting_on == "run:going~1"
    env.send("going~1", "add", 2)
    env.send("going~2", "add", 3)
    assert env.run("going~2").status is RunStatus.COMPLETED
    # Not the chain's parent, so nothing wakes the waiter: it looks again within 1 s.
    assert env.run(waiter.id).status is RunStatus.WAITING
    env.advance(1.0)
    assert waiter.result() == 6


def test_continue_as_new_outside_a_workflow_or_in_a_task(env: DurableEnv) -> None:
    """Outside any run, and in a task body, continue_as_new is a DurableError that
    says where it belongs; the run fails with it and nothing continues."""
    with pytest.raises(DurableError, match="inside a workflow"):
        durable.continue_as_new(1)
    handle = env.dispatch(app.calls_a_task_that_continues, id="task-run")
    with pytest.raises(DurableError, match="a task body cannot call it"):
        handle.result()
    assert env.run("task-run").status is RunStatus.FAILED
    assert env.backend.get_run("task-run~1") is None


def test_continue_as_new_in_a_child_run_is_refused(env: DurableEnv) -> None:
    """A child run cannot continue as new: the child fails with an error that says
    what to do instead, and its parent sees it."""
    with pytest.raises(DurableError, match="not supported in a child run"):
        env.execute(app.parent_of_a_continuing_child, id="family")
    assert env.run("family/0").status is RunStatus.FAILED
    assert env.backend.get_run("family/0~1") is None


@pytest.mark.parametrize(
    ("kind", "error"), [("unbound", TypeError), ("unstorable", SerializationError)]
)
def test_arguments_that_do_not_fit_fail_the_run(
    env: DurableEnv, kind: str, error: type[Exception]
) -> None:
    """Arguments that do not bind, or cannot be stored, fail the run with that error;
    no successor is made."""
    handle = env.dispatch(app.bad_arguments, kind, id=f"bad-{kind}")
    with pytest.raises(error):
        handle.result()
    assert env.run(f"bad-{kind}").status is RunStatus.FAILED
    assert env.backend.get_run(f"bad-{kind}~1") is None


def test_cancel_and_views_of_a_chain(env: DurableEnv) -> None:
    """cancel() of an old id reaches the current run; an operator's cancel of a
    continued run names its successor; show names the links."""
    env.dispatch(app.accumulate, 0, 3, id="stop")
    env.send("stop", "add", 1)
    ops = Operations(env.engine)
    with pytest.raises(Conflict, match="continued as new as run 'stop~1'"):
        ops.cancel("stop")
    sent = ops.send("stop", "note", 1, sender="ann")  # logged where it was delivered
    assert sent["event"]["run_id"] == "stop~1"
    [action] = ops.actions("stop~1")
    assert action["action"] == "send" and action["detail"]["sent_to"] == "stop"
    assert durable.cancel("stop") is True
    env.drain()
    assert env.run("stop~1").status is RunStatus.CANCELLED
    assert ops.get_run("stop")["continued_as"] == "stop~1"
    assert ops.get_run("stop~1")["continues"] == "stop"
    assert ops.get_run("stop~1")["continued_as"] is None


def test_an_async_workflow_continues_as_new(memory_engine: durable.Engine) -> None:
    """execute_async follows the chain of an async workflow to its last run."""
    import asyncio

    assert asyncio.run(durable.execute_async(app.async_counter, 0, 4, id="aio")) == 4
    assert memory_engine.reread("aio~2").status is RunStatus.CONTINUED
    assert memory_engine.reread("aio~3").status is RunStatus.COMPLETED


def test_continued_runs_are_finished_for_purge_and_stats(memory_engine: durable.Engine) -> None:
    """purge deletes continued runs like other finished ones (the running end of a
    chain stays); stats count each link as a run, neither success nor failure."""
    assert durable.execute(app.counter, 0, 3, id="old") == 3
    ops = Operations(memory_engine)
    [stat] = [s for s in ops.stats()["workflows"] if s["name"] == app.counter.name]
    assert stat["runs"] == 3 and stat["completed"] == 1 and stat["failed"] == 0
    assert stat["success"] == 100.0
    assert durable.purge(0) == 3
    assert memory_engine.backend.get_run("old") is None
    assert memory_engine.backend.get_run("old~2") is None


@pytest.mark.parametrize(("overlap", "chains"), [("skip", 1), ("allow", 3)])
def test_a_schedules_overlap_policy_sees_a_chain_as_running(
    env: DurableEnv, overlap: str, chains: int
) -> None:
    """A scheduled run that continues as new is still running for the overlap policy:
    with skip, later ticks start nothing while its chain goes on."""
    durable.schedule(app.scheduled_loop, id=f"loop-{overlap}", every=60, overlap=overlap)
    env.advance(210)  # ticks at 60, 120 and 180 s
    runs = env.backend.list_runs(RunQuery(workflow=app.scheduled_loop.name), limit=100)
    bases = {run.id.split("~")[0] for run in runs}
    assert len(bases) == chains, sorted(run.id for run in runs)
    assert any(run.status is RunStatus.CONTINUED for run in runs)


def test_durable_show_names_the_links(env: DurableEnv) -> None:
    """`durable show` of a continued run says whom it continued as; of a successor,
    which run it continues."""
    from durable.cli.output import run_text

    env.execute(app.counter, 0, 2, id="shown")
    ops = Operations(env.engine)
    first = run_text(ops.get_run("shown"), [])
    assert "continued as shown~1" in first and "continues" not in first
    second = run_text(ops.get_run("shown~1"), [])
    assert "completed" in second and "continues  shown" in second
