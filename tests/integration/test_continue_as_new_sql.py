"""continue_as_new on SQLite and PostgreSQL: chains executed, dispatched to a worker,
sent to, and refused (the memory backend's cases are in tests/unit)."""

from __future__ import annotations

import pytest

import durable
from durable import RunStatus, Worker
from durable.errors import DurableError
from tests.unit import continuing_app as app

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(autouse=True)
def _clean() -> None:
    app.bodies.clear()


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_execute_follows_a_chain_of_two_hundred(engine: durable.Engine) -> None:
    """execute returns the chain's last result; each run's history is one step; the
    chain holds one run per link, none twice."""
    assert durable.execute(app.counter, 0, 200, id="sql-chain") == 200
    assert len(app.bodies) == 200
    assert [i for _, i in app.bodies] == list(range(200))
    backend = engine.backend
    for link in range(200):
        run_id = "sql-chain" if link == 0 else f"sql-chain~{link}"
        assert len(backend.load_history(run_id)) == 1, run_id
    assert backend.get_run("sql-chain~199").status is RunStatus.COMPLETED  # type: ignore[union-attr]
    assert backend.get_run("sql-chain~200") is None
    assert durable.get("sql-chain~50").result(timeout=10) == 200


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_worker_runs_a_chain_that_events_drive(engine: durable.Engine) -> None:
    """A dispatched chain on a worker: events sent to the base id before and after the
    hand-overs all reach it; Handle.result() follows to the end."""
    handle = durable.dispatch(app.accumulate, 0, 3, id="sql-sum")
    durable.send("sql-sum", "add", 1)
    durable.send("sql-sum", "add", 10)  # waits in the inbox: moved at the hand-over
    with Worker(engine, poll=0.02):
        durable.send("sql-sum", "add", 100)
        assert handle.result(timeout=30) == 111
    assert engine.reread("sql-sum").status is RunStatus.CONTINUED
    assert engine.reread("sql-sum~2").status is RunStatus.COMPLETED
    consumed = {
        run_id: [e.consumed_position for e in engine.backend.events(run_id)]
        for run_id in ("sql-sum", "sql-sum~1", "sql-sum~2")
    }
    assert consumed == {"sql-sum": [0], "sql-sum~1": [0], "sql-sum~2": [0]}, consumed


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_child_run_cannot_continue(engine: durable.Engine) -> None:
    """The refusal in a child run is the same on SQL: the child fails, nothing follows."""
    with pytest.raises(DurableError, match="not supported in a child run"):
        durable.execute(app.parent_of_a_continuing_child, id="sql-family")
    assert engine.reread("sql-family/0").status is RunStatus.FAILED
    assert engine.backend.get_run("sql-family/0~1") is None
