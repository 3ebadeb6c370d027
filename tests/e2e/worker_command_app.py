"""Workflows for the `durable worker` command, cancellation and wait(handle) tests.

Every task body appends its line to the ledger first (``run position pid token``, see
`tests.e2e.workers_app.ledger`), so a test counts body executions without trusting the
database under test. `hold` stops at the pause point ``in-hold`` in a process started
with ``DURABLE_TEST_PAUSE=in-hold`` until the test deletes its marker file.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta
from typing import Any

import durable
from durable import dispatch, execute, task, wait, workflow
from tests.e2e.workers_app import ledger, pause_point


@task
def hold() -> str:
    token = ledger()
    pause_point("in-hold")
    return token


@task
def mark() -> str:
    return ledger()


@task
def tidy() -> str:
    return ledger()


@task(heartbeat=timedelta(seconds=1.5))  # a heartbeat write every 0.5 s at most
def endless() -> str:
    """Would run a minute; heartbeats every 10 ms with its progress."""
    token = ledger()
    for i in range(6000):
        durable.heartbeat({"done": i, "of": 6000})
        time.sleep(0.01)
    return token


@workflow
def diligent() -> str:
    """A long heartbeating task; `tidy` in ``finally``."""
    try:
        return endless()
    finally:
        tidy()


@workflow
def careful() -> str:
    """Holds in a task, then marks; cleanup (`tidy`) runs in ``finally``."""
    try:
        hold()
        mark()
        return "finished"
    finally:
        tidy()


@workflow
def prudent() -> str:
    """Holds in a task and then has nothing left to call but its cleanup: one `tidy`
    in ``except Cancelled`` (a compensation), one in ``finally``. Pauses at
    ``in-except`` (workflow code, between the cancel and the cleanups)."""
    try:
        hold()
        return "finished"
    except durable.Cancelled:
        pause_point("in-except")
        tidy()
        raise
    finally:
        tidy()


@workflow
def patient(kind: str) -> object:
    """Waits an hour, for an event (*kind* "event") or a timer ("sleep"); `tidy` in
    ``finally``."""
    try:
        if kind == "event":
            return durable.wait("go", timeout=3600)
        durable.wait(3600)
        return "slept"
    finally:
        tidy()


@workflow
def guardian() -> list[object]:
    """Parent of a running child (`careful`) and a waiting one (`patient`)."""
    try:
        running = dispatch(careful)
        waiting = dispatch(patient, "event")
        return [wait(running), wait(waiting)]
    finally:
        tidy()


# The example: a background task dispatched by a workflow, joined at the end.


@task
def charge(order_id: str) -> str:
    ledger()
    return f"receipt-{order_id}"


@task
def send_receipt(order_id: str, receipt: str) -> dict[str, object]:
    token = ledger()
    return {"sent": f"{receipt} to {order_id}", "pid": os.getpid(), "token": token}


@task
def label(order_id: str) -> str:
    ledger()
    return f"label-{order_id}"


@workflow
def ship_parcel(order_id: str) -> str:
    return label(order_id)


@workflow
def order(order_id: str) -> dict[str, Any]:
    receipt = charge(order_id)
    handle = dispatch(send_receipt.bind(order_id, receipt))
    parcel = execute(ship_parcel, order_id)
    return {"label": parcel, "receipt": wait(handle)}


@task
def linger(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@workflow
def lasting(seconds: float) -> float:
    """Takes *seconds* in one task body."""
    return linger(seconds)


# An async workflow gathering two branches of two steps each (issue 22's example): the
# b-steps finish first, so live the branches finish in another order than they start.
@task
async def act(name: str) -> int:
    ledger()
    await asyncio.sleep(0.2 if name.startswith("a") else 0.02)
    return {"a1": 1, "a2": 2, "b1": 30, "b2": 400}[name]


async def _two_steps(first: str, second: str) -> int:
    return await act(first) + await act(second)


@workflow
async def gathering() -> int:
    """Two multi-step branches in ``asyncio.gather``, then a wait that suspends the run,
    so it is replayed by the worker that takes it up again."""
    parts = await asyncio.gather(_two_steps("a1", "a2"), _two_steps("b1", "b2"))
    durable.wait(timedelta(seconds=1))
    return sum(parts)


# Pause and resume (issue 15): a short nap, so that its timer comes due while paused.


@workflow
def napper(seconds: float) -> str:
    """Sleeps *seconds*, then tidies."""
    wait(timedelta(seconds=seconds))
    return tidy()
