"""A workflow whose process dies in the middle of task 3, and a second process that
finishes it.

    python examples/crash_and_resume.py

The script starts itself as a child process. The child runs the workflow and kills
itself with os._exit inside task 3's body, the way a crash or a deploy would. This
process then calls durable.recover(): the run is replayed from the database, tasks 1
and 2 return their recorded results without running, and task 3, recorded as started
but never finished, runs again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import durable
from durable import execute, task, workflow

LEDGER = Path("crash_and_resume.ledger")  # each task body appends a line here


def note(line: str) -> None:
    with LEDGER.open("a") as ledger:
        ledger.write(f"{line}\n")


@task
def step(n: int) -> str:
    note(f"task {n} ran in process {os.getpid()}")
    if n == 3 and os.environ.get("CRASH_IN_TASK_3"):
        note(f"process {os.getpid()} dies now (os._exit) in the middle of task 3")
        os._exit(1)
    return f"result of task {n}"


@workflow
def three_steps() -> list[str]:
    return [step(1), step(2), step(3)]


def main() -> None:
    if len(sys.argv) > 1:  # the child: run the workflow until it dies
        execute(three_steps, id=sys.argv[1])
        return
    LEDGER.unlink(missing_ok=True)
    run_id = f"crash-demo-{uuid.uuid4().hex[:8]}"
    child = subprocess.run(
        [sys.executable, __file__, run_id],
        env={**os.environ, "CRASH_IN_TASK_3": "1"},
        check=False,  # the child is meant to die
    )
    print(f"child process exited with code {child.returncode}; run {run_id} is unfinished")
    print(f"this process ({os.getpid()}) calls durable.recover() ...")
    resumed = durable.recover()
    print("resumed runs:", resumed)
    print("what the task bodies did, in order:")
    for line in LEDGER.read_text().splitlines():
        print("  " + line)
    ran = LEDGER.read_text()
    assert ran.count("task 1 ran") == 1 and ran.count("task 2 ran") == 1, "a task ran twice!"
    print("result:", execute(three_steps, id=run_id))
    print("tasks 1 and 2 were replayed from the database, not re-run; task 3 ran again.")


if __name__ == "__main__":
    main()
