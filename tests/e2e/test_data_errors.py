"""Values the database refuses fail their run once, in a `durable worker` process.

A NUL in an event name (a user-supplied id) used to reach PostgreSQL, whose refusal
was reported as "database unavailable": the worker handed the run back and claimed it
again, about 630 times a second, forever. Now the name is refused where it is given
(`InvalidValue`, a ValueError), and a value only the database refuses (a task whose
registered name holds a NUL) is classified as bad input too, not as an outage: either
way the workflow call raises, the workflow can catch it, and otherwise the run ends
failed after one attempt. Each workflow body writes a ledger line when it starts.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest

import durable
from durable import RunStatus
from durable.errors import InvalidValue
from tests.e2e import data_errors_app as app
from tests.e2e.harness import Children

pytestmark = pytest.mark.e2e
SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
NUL_ORDER = "o-1\x00; drop"


def starts(children: Children) -> Counter[str]:
    """How many times each run's workflow body started, from the ledger."""
    if not children.ledger.exists():
        return Counter()
    return Counter(children.ledger.read_text().split())


def settled(
    engine: durable.Engine, children: Children, run_ids: list[str], waiting: tuple[str, ...]
) -> None:
    """Until every run has finished and every one of *waiting* waits, or one was
    attempted more than a few times (the hot loop this test is about: fail fast, with
    the count, rather than time out)."""
    deadline = time.monotonic() + 30
    while True:
        runs = [engine.backend.get_run(run_id) for run_id in run_ids]
        waits = [engine.backend.get_run(run_id) for run_id in waiting]
        if all(run is not None and run.status.finished for run in runs) and all(
            run is not None and run.status is RunStatus.WAITING for run in waits
        ):
            return
        counts = starts(children)
        looping = {run_id: n for run_id, n in counts.items() if n > 5}
        assert not looping, f"runs attempted again and again: {looping}"
        assert time.monotonic() < deadline, f"not finished: {runs}, not waiting: {waits}"
        time.sleep(0.05)


def failure(engine: durable.Engine, run_id: str) -> BaseException:
    run = engine.backend.get_run(run_id)
    assert run is not None and run.status is RunStatus.FAILED, run
    return engine.load_error(engine.error_of(run), run_id, None)


def run_worker(
    children: Children, engine: durable.Engine, run_ids: list[str], waiting: tuple[str, ...] = ()
) -> None:
    """Run a worker until *run_ids* have finished and *waiting* wait; then kill it."""
    worker = children.spawn(
        ["-m", "durable", "worker", "tests.e2e.data_errors_app", "--db", children.url]
    )
    try:
        settled(engine, children, run_ids, waiting)
        assert worker.poll() is None, children.log(worker)
    finally:
        children.kill(worker)


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_nul_in_an_event_name_fails_the_run_once(
    url: str, engine: durable.Engine, children: Children
) -> None:
    """wait() and send() with a NUL in the event name: each run fails after one attempt
    with an InvalidValue naming the problem; a workflow that catches it completes."""
    durable.dispatch(app.waits_for_nul, NUL_ORDER, id="waits")
    durable.dispatch(app.waits_for_nul, "o-2", id="target")
    durable.dispatch(app.sends_nul, "target", NUL_ORDER, id="sends")
    durable.dispatch(app.catches_refusal, NUL_ORDER, id="catches")
    # "target" waits for an event that never comes: it ends waiting, not failed. The
    # worker is killed once the others have settled and it waits: killed on its way
    # there, it would stay running under a dead owner, with nobody left to recover it.
    run_worker(children, engine, ["waits", "sends", "catches"], waiting=("target",))
    assert {r: starts(children)[r] for r in ("waits", "sends", "catches")} == {
        "waits": 1,
        "sends": 1,
        "catches": 1,
    }
    for run_id in ("waits", "sends"):
        error = failure(engine, run_id)
        assert isinstance(error, InvalidValue) and isinstance(error, ValueError), repr(error)
        assert "NUL" in str(error) and "event name" in str(error), str(error)
        assert repr(f"shipped:{NUL_ORDER}" if run_id == "sends" else f"paid:{NUL_ORDER}") in str(
            error
        )
    answer: Any = durable.get("catches").result(timeout=5)
    assert answer.startswith("noted: ") and "NUL" in answer
    target = engine.backend.get_run("target")
    assert target is not None and target.status is RunStatus.WAITING, target


REFUSE_STEPS = f"""
CREATE FUNCTION durable_test_refuse() RETURNS trigger AS $$
BEGIN
  IF NEW.name = '{app.REFUSED}' THEN
    RAISE EXCEPTION 'value out of range: %', NEW.name USING ERRCODE = '22003';
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER durable_test_refuse BEFORE INSERT OR UPDATE ON durable_history
  FOR EACH ROW EXECUTE FUNCTION durable_test_refuse();
"""


@pytest.mark.postgres
@pytest.mark.parametrize("url", ["postgres"], indirect=True)
def test_a_value_postgres_refuses_fails_the_run_once(
    url: str, engine: durable.Engine, children: Children
) -> None:
    """A data error from PostgreSQL itself (SQLSTATE class 22, raised here by a trigger
    on the history table for one task's steps) is bad input, not an outage: the run
    fails once with InvalidValue naming the step, instead of being handed back and
    claimed again forever; a workflow that catches it completes."""
    import psycopg

    durable.dispatch(app.calls_unstorable_task, "o-3", id="unstorable")
    durable.dispatch(app.catches_database_refusal, "o-4", id="caught")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(REFUSE_STEPS)
    run_worker(children, engine, ["unstorable", "caught"])
    assert {r: starts(children)[r] for r in ("unstorable", "caught")} == {
        "unstorable": 1,
        "caught": 1,
    }
    error = failure(engine, "unstorable")
    assert isinstance(error, InvalidValue), repr(error)
    assert "value out of range" in str(error) and repr(app.REFUSED) in str(error), str(error)
    assert "position 0" in str(error) and "StorageError" not in str(error)
    answer: Any = durable.get("caught").result(timeout=5)
    assert answer.startswith("noted: ") and "value out of range" in answer
