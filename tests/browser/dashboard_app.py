"""Workflows whose genuine runs fill the dashboard in the browser tests.

- `fulfil`: a task, two tasks in parallel, then a child workflow; completes.
- `checkout`: a task, then a charge that fails on both of its attempts unless the
  order is in ACCEPTED.
- `approve`: a task, then a wait for the event "approval"; returns the answer.
- `ship`: a task, a task that blocks until its gate opens, then a task. Left blocked,
  its run stays "running" for as long as the test needs.
- `crunch`: a task, then `grind`, which reports 40 of 100 done by heartbeat and blocks
  until its gate opens (a running task with progress).
- `overrun`: a task whose only attempt runs past its timeout (a timed-out step).
- `overdue`: a task, then a wait for an event that never comes, past the run's
  deadline (a timed_out run).
- `echo`: returns its argument (the XSS check puts markup in it).
- `brood`: `pack` as a child, then `ship` started as a second child and waited for:
  the run waits for a run (its child blocked in `hold` until the gate opens).
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import durable
from durable import task, workflow

#: price and stock meet here, so they provably overlap (the history shows them in
#: parallel only if one started before the other finished).
PAIR = threading.Barrier(2, timeout=10)
#: ship(order) blocks in `hold` until GATES[order] is set; ENTERED[order] says it got there.
GATES: dict[str, threading.Event] = {}
ENTERED: dict[str, threading.Event] = {}


@task
def fetch(order: str) -> dict[str, Any]:
    return {"order": order, "items": 2}


@task
def price(order: str) -> int:
    PAIR.wait()
    return 1250


@task
def stock(order: str) -> bool:
    PAIR.wait()
    return True


@task
def label(order: str) -> str:
    return f"label-{order}"


@workflow
def pack(order: str) -> str:
    return label(order)


@workflow
def fulfil(order: str) -> dict[str, Any]:
    info = fetch(order)
    cents, available = durable.execute(price.bind(order), stock.bind(order))
    return {"info": info, "cents": cents, "available": available, "label": pack(order)}


#: orders whose card `charge` accepts; every other one is declined.
ACCEPTED: set[str] = set()


@task(retry=dict(attempts=2, initial=0.0))
def charge(order: str, cents: int) -> str:
    if order not in ACCEPTED:
        raise ValueError(f"card declined for {order}")
    return f"charged {order}"


@workflow
def checkout(order: str) -> str:
    fetch(order)
    return charge(order, 1250)


@workflow
def approve(order: str) -> Any:
    fetch(order)
    return durable.wait("approval", timeout=timedelta(days=1))


def _block(order: str) -> str:
    ENTERED[order].set()
    if not GATES[order].wait(timeout=60):
        raise TimeoutError(f"the gate of {order} was never opened")
    return "released"


@task
def hold(order: str) -> str:
    return _block(order)


@task
def notify(order: str) -> str:
    return f"notified {order}"


@workflow
def ship(order: str) -> str:
    fetch(order)
    hold(order)
    return notify(order)


@task
def grind(order: str) -> str:
    durable.heartbeat({"done": 40, "of": 100})  # the first heartbeat writes at once
    return _block(order)


@workflow
def crunch(order: str) -> str:
    fetch(order)
    return grind(order)


@task(timeout=0.05, retry=1)
def linger(order: str) -> str:
    time.sleep(0.2)
    return f"too late for {order}"


@workflow
def overrun(order: str) -> str:
    return linger(order)


@workflow(timeout=0.3)
def overdue(order: str) -> Any:
    fetch(order)
    return durable.wait("approval")


@workflow
def echo(value: str) -> str:
    return value


@workflow
def brood(order: str) -> str:
    pack(order)
    return durable.dispatch(ship, order).result()
