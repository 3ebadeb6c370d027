"""Workflows that hand the database values it refuses, for tests/e2e/test_data_errors.py.

Each workflow body appends its run id to the ledger (DURABLE_TEST_LEDGER) every time it
starts, so the test can count how often a run was attempted: a refused value must fail
the run once, not hand it back to be claimed again in a loop.
"""

from __future__ import annotations

import os

from durable import send, task, wait, workflow
from durable.errors import InvalidValue


def started() -> None:
    """One line in the ledger for this body's start."""
    from durable import info

    run = info()
    assert run is not None
    line = f"{run.run_id}\n".encode()
    fd = os.open(os.environ["DURABLE_TEST_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@task
def note(text: str) -> str:
    return f"noted: {text}"


#: The test puts a trigger on PostgreSQL's history table that refuses this task's steps
#: with a data error (SQLSTATE 22003, numeric value out of range), as PostgreSQL refuses
#: a value it cannot hold: no check in durable stands in front of that refusal.
REFUSED = "tests.e2e.data_errors_app.refused"


@task(name=REFUSED)
def refused(order: str) -> str:
    return order


@workflow
def waits_for_nul(order: str) -> object:
    """Waits for an event whose name holds a user-supplied id with a NUL in it."""
    started()
    return wait(f"paid:{order}", timeout=60)


@workflow
def sends_nul(target: str, order: str) -> None:
    started()
    send(target, f"shipped:{order}", {"order": order})


@workflow
def calls_unstorable_task(order: str) -> str:
    started()
    return refused(order)


@workflow
def catches_refusal(order: str) -> str:
    """Catches the refusal and carries on: a task after it runs and the run completes."""
    started()
    try:
        wait(f"paid:{order}", timeout=60)
    except InvalidValue as error:
        return note(str(error))
    return note("no error")


@workflow
def catches_database_refusal(order: str) -> str:
    started()
    try:
        refused(order)
    except InvalidValue as error:
        return note(str(error))
    return note("no error")
