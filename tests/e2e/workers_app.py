"""Workflows that `durable worker` subprocesses run in the end-to-end tests.

Every task body appends one line to the ledger (DURABLE_TEST_LEDGER) before it
returns: ``run position pid token``. The token is also in the task's result, so the
checker can tell which body execution's result was recorded.

Environment:
    DURABLE_TEST_LEDGER   the append-only ledger file
    DURABLE_TEST_PAUSE    pause points ("in-slow", ...; several separated by commas)
                          where the body waits for its marker file
                          (DURABLE_TEST_MARKERS/<point>.<pid>) to vanish
    DURABLE_TEST_STEP_MS  how long storm tasks take (default 5)

SIGUSR1 makes a worker write every thread's stack to its log (stderr): the tests send
it to a worker that does not stop in time, so the failure says where it hung.
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
import time
import uuid
from pathlib import Path

import durable
from durable import dispatch, task, wait, workflow

faulthandler.register(signal.SIGUSR1, all_threads=True)


def ledger() -> str:
    """Append this task body's line to the ledger; return its token."""
    token = uuid.uuid4().hex[:12]
    run_id, position = durable.task_key().rsplit(":", 1)
    line = f"{run_id} {position} {os.getpid()} {token}\n"
    fd = os.open(os.environ["DURABLE_TEST_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one write under PIPE_BUF: atomic, never interleaved
    finally:
        os.close(fd)
    return token


def pause_point(name: str) -> None:
    """Wait here while the test holds this process (see tests/e2e/harness.py)."""
    if name not in os.environ.get("DURABLE_TEST_PAUSE", "").split(","):
        return
    marker = Path(os.environ["DURABLE_TEST_MARKERS"]) / f"{name}.{os.getpid()}"
    marker.touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and marker.exists():
        time.sleep(0.01)


@task
def storm_step(i: int, n: int) -> dict[str, object]:
    token = ledger()
    # A heartbeat write (the first of an attempt writes at once), fenced like the rest:
    # a worker killed or taken over around it must not break anything.
    durable.heartbeat({"run": i, "step": n})
    time.sleep(int(os.environ.get("DURABLE_TEST_STEP_MS", "5")) / 1000)
    return {"value": i * 10 + n, "token": token, "pid": os.getpid()}


@workflow
def storm(i: int) -> list[int]:
    """Three tasks; the result is [10i, 10i+1, 10i+2], checkable without the database."""
    return [storm_step(i, n)["value"] for n in range(3)]  # type: ignore[misc]


@task
def slow_step(n: int, seconds: float) -> dict[str, object]:
    token = ledger()
    pause_point("in-slow")
    time.sleep(seconds)
    return {"value": n, "token": token, "pid": os.getpid()}


@workflow
def slow(seconds: float) -> list[int]:
    return [slow_step(n, seconds)["value"] for n in range(3)]  # type: ignore[misc]


@task(heartbeat=2, retry=dict(attempts=3, backoff="constant", initial=0))
def beating_step(beats: int) -> dict[str, object]:
    """Heartbeats every 0.1 s; pauses (``in-beating``) after its first heartbeat write."""
    token = ledger()
    for i in range(beats):
        durable.heartbeat({"done": i, "of": beats})
        if i == 0:
            pause_point("in-beating")
        time.sleep(0.1)
    return {"token": token, "pid": os.getpid()}


@workflow
def beating(beats: int) -> int:
    """One heartbeating task; its result is the pid of the process that ran it."""
    return beating_step(beats)["pid"]  # type: ignore[return-value]


@workflow
def child(i: int) -> int:
    return storm_step(i, 0)["value"] + 1  # type: ignore[operator,no-any-return]


@workflow
def parent(i: int) -> list[int]:
    handle = dispatch(child, i)
    mine = storm_step(i, 1)["value"]
    return [mine, wait(handle)]  # type: ignore[list-item]


@task
def crash() -> None:
    ledger()
    os._exit(3)  # the process dies inside the task, every time


@workflow
def poison() -> None:
    crash()


@workflow
def napper(seconds: float) -> list[float]:
    """Sleep durably; return [before, after] as recorded (durable.now())."""
    before = durable.now()
    durable.wait(seconds)
    return [before.timestamp(), durable.now().timestamp()]


@workflow
def event_napper() -> object:
    """Wait for a "go" event for up to a minute."""
    return durable.wait("go", timeout=60)


@task
def deploy_step(n: int) -> dict[str, object]:
    """Note which process, running which code version, ran this body."""
    token = ledger()
    return {"n": n, "pid": os.getpid(), "version": durable.get_engine().version, "token": token}


@workflow
def deployed() -> list[object]:
    """A step, a wait for "go" (across a deploy), another step."""
    before = deploy_step(0)
    durable.wait("go", timeout=60)
    return [before, deploy_step(1)]


@task
async def io_step(i: int, n: int, seconds: float) -> dict[str, object]:
    """An async task: the ledger's line, then *seconds* awaited (no thread held)."""
    token = ledger()
    await asyncio.sleep(seconds)
    return {"value": i * 10 + n, "token": token, "pid": os.getpid()}


@workflow
async def io_storm(i: int, seconds: float) -> list[int]:
    """Three async tasks in a row, on a worker's event loop; [10i, 10i+1, 10i+2]."""
    return [(await io_step(i, n, seconds))["value"] for n in range(3)]  # type: ignore[misc]


@task
async def io_wait(i: int, seconds: float) -> int:
    """Awaits *seconds* of I/O (no ledger: thousands run at once)."""
    await asyncio.sleep(seconds)
    return i


@workflow
async def io_bound(i: int, seconds: float) -> int:
    return await io_wait(i, seconds) + 1
