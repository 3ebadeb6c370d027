"""Resuming a run reads its whole history with one query, however long the history is.

Every statement the engine sends goes through a pooled session's ``execute``; the test
wraps that on the resuming engine and compares the statements of resuming a run of 50
recorded steps with those of resuming one of 200.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

import durable
from durable import RunStatus, execute, task, workflow
from durable.backends import Backend
from durable.backends._connections import Session
from durable.backends.sql import SQLBackend
from tests.unit.helpers import Crash

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
#: A resume sends a handful of statements: join, claim, history, the new step's start and
#: its result, the end. On SQLite the start, written alone, is a relaxed transaction
#: (PRAGMA synchronous both ways, BEGIN, COMMIT: statements without an fsync).
MOST_STATEMENTS = 13

bodies: list[int] = []
crash_at: set[int] = set()


@task
def step(i: int) -> int:
    if i in crash_at:
        crash_at.discard(i)
        raise Crash  # the process "dies" here; nothing of this step is recorded
    bodies.append(i)
    return i


@workflow
def long(n: int) -> int:
    for i in range(n + 1):
        step(i)
    return n


@pytest.fixture(autouse=True)
def _reset() -> None:
    bodies.clear()
    crash_at.clear()


def count_statements(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, append the SQL of every statement *backend* sends to the list returned."""
    assert isinstance(backend, SQLBackend)
    sent: list[str] = []
    db = backend._db
    checkout = db.checkout

    def counting(run: Callable[..., Any]) -> Callable[..., Any]:
        def execute(sql: str, *params: Any) -> Any:
            sent.append(sql)
            return run(sql, *params)

        execute.counting = True  # type: ignore[attr-defined]
        return execute

    def checkout_counting() -> Session:
        session = checkout()
        if not getattr(session.execute, "counting", False):
            session.execute = counting(session.execute)
        return session

    monkeypatch.setattr(db, "checkout", checkout_counting)
    return sent


def resume(url: str, n: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record n steps of `long(n)`, crash at step n, resume it with a fresh engine (a new
    process, in effect); return the statements the resume sent."""
    run_id = f"long-{n}"
    first = durable.configure(url, lease=300)  # no heartbeat statement during the test
    crash_at.add(n)
    with pytest.raises(Crash):
        execute(long, n, id=run_id)
    # n steps, and the start of the one the crash interrupted (recorded before its body)
    assert len(first.backend.load_history(run_id)) == n + 1

    second = durable.configure(url, lease=300)  # closes the first engine
    try:
        sent = count_statements(second.backend, monkeypatch)
        bodies.clear()
        assert execute(long, n, id=run_id) == n
        statements = list(sent)
        assert bodies == [n], "the recorded steps were replayed; only step n ran"
        stored = second.backend.get_run(run_id)
        assert stored is not None and stored.status is RunStatus.COMPLETED and stored.epoch == 2
        assert len(second.backend.load_history(run_id)) == n + 1
    finally:
        second.close()
    return statements


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_resume_loads_the_history_in_one_query(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Resuming a run of 200 recorded steps reads its history with exactly one SELECT and
    sends the same few statements as resuming a run of 50: nothing is sent per step."""
    short = resume(url, 50, monkeypatch)
    longer = resume(url, 200, monkeypatch)

    with contextlib.closing(SQLBackend(url)) as backend:
        history_query = backend._sql.load_history.sql
    assert short.count(history_query) == 1
    assert longer.count(history_query) == 1, "the history is read once, not once per step"
    assert len(longer) == len(short), (
        f"{len(short)} statements to resume 50 steps but {len(longer)} to resume 200: "
        "a resume must not send anything per replayed step"
    )
    assert longer == short
    assert len(longer) <= MOST_STATEMENTS, longer
