"""The workflow `durable worker` subprocesses run in tests/e2e/test_streams_crash.py:
it streams N values from workflow code with a task between them.

Each task body writes its ledger line (tests/e2e/workers_app.py: `ledger`), and the
body at DURABLE_TEST_KILL_AT pauses at ``in-stream-step`` (when DURABLE_TEST_PAUSE
names it) for the test to kill its worker there.
"""

from __future__ import annotations

import os

import durable
from durable import task, workflow
from tests.e2e.workers_app import ledger, pause_point

VALUES = durable.stream("values")


@task
def stream_step(n: int) -> dict[str, object]:
    token = ledger()
    if n == int(os.environ.get("DURABLE_TEST_KILL_AT", "-1")):
        pause_point("in-stream-step")
    return {"value": n, "token": token, "pid": os.getpid()}


@workflow
def streamer(count: int) -> list[int]:
    """Writes 0..count-1 to "values", each followed by a task; then closes it."""
    values = []
    for n in range(count):
        VALUES.write(n)
        values.append(stream_step(n)["value"])
    VALUES.close()
    return values  # type: ignore[return-value]
