"""Workflows that end-to-end tests run in child processes, and a small CLI to drive them.

    python -m tests.e2e.app run URL RUN_ID     execute `three` under RUN_ID, print the result
    python -m tests.e2e.app recover URL        call durable.recover(), print the resumed ids
    python -m tests.e2e.app dispatch URL N     dispatch storm(i) as race-<i> for i < N, print ids
    python -m tests.e2e.app nap URL RUN_ID S   execute napper(S) under RUN_ID, print the result

Environment:
    DURABLE_TEST_LEDGER   append-only file; every task body appends "run position pid"
    DURABLE_TEST_PAUSE    a pause point ("between", "in-step-2", ...): on reaching it the
                          process writes a marker file and sleeps until killed or resumed
    DURABLE_TEST_MARKERS  directory for marker files (<point>.<pid>)
    DURABLE_TEST_LEASE    the engine's lease in seconds
    DURABLE_TEST_START    wait for this file to exist before acting (to line up a race)
    DURABLE_TEST_CODE     "changed": `three` calls `other` at position 1 instead of `step`
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import durable
from durable import task, workflow


def _ledger(line: str) -> None:
    # O_APPEND writes under PIPE_BUF bytes are atomic: lines from several processes
    # never interleave, and nothing a task wrote is lost when its process is killed.
    fd = os.open(os.environ["DURABLE_TEST_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def pause_point(name: str) -> None:
    """Stop here (for a test to kill or freeze us) if this process was told to."""
    if os.environ.get("DURABLE_TEST_PAUSE") != name:
        return
    marker = Path(os.environ["DURABLE_TEST_MARKERS"]) / f"{name}.{os.getpid()}"
    marker.touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and marker.exists():
        time.sleep(0.01)  # the test deletes the marker to let us go on


@task
def step(i: int) -> dict[str, int]:
    if i == 3:
        # Tasks 1 and 2 are committed (task 2's result with task 3's start), and task 3
        # has not done anything yet.
        pause_point("between")
    key = durable.task_key()
    _ledger(f"{key.rsplit(':', 1)[0]} {i - 1} {os.getpid()}")
    pause_point(f"in-step-{i}")
    return {"i": i, "pid": os.getpid()}


@task
def other(i: int) -> dict[str, int]:
    """What position 1 calls in "changed" code: it leaves a marker if it ever runs."""
    (Path(os.environ["DURABLE_TEST_MARKERS"]) / f"other-ran.{os.getpid()}").touch()
    return {"i": -i, "pid": os.getpid()}


@workflow
def three() -> list[dict[str, int]]:
    first = step(1)
    # DURABLE_TEST_CODE=changed stands for a deploy that changed this line.
    second = other(2) if os.environ.get("DURABLE_TEST_CODE") == "changed" else step(2)
    # Workflow code: task 2's result is not committed yet (it goes with task 3's start).
    pause_point("in-workflow")
    return [first, second, step(3)]


def main(argv: list[str]) -> Any:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    command, url = argv[0], argv[1]
    durable.configure(url, lease=float(os.environ.get("DURABLE_TEST_LEASE", "30")))
    start = os.environ.get("DURABLE_TEST_START")
    while start and not Path(start).exists():
        time.sleep(0.005)
    if command == "run":
        return durable.execute(three, id=argv[2])
    if command == "recover":
        return durable.recover()
    if command == "nap":
        from tests.e2e.workers_app import napper

        return durable.execute(napper, float(argv[3]), id=argv[2])
    if command == "dispatch":
        from tests.e2e.workers_app import storm

        return [durable.dispatch(storm, i, id=f"race-{i}").id for i in range(int(argv[2]))]
    raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])), flush=True)
