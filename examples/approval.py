"""Waiting for a human: an approval that times out, and one that gets its answer.

Run it twice in a row: the first run waits for real (a few seconds); the second finds
both runs finished in durable.db and prints their stored results at once.

    python examples/approval.py

Each `approval` run asks for a review, then waits up to 3 seconds for a "reviewed"
event. While it waits it is a row in durable.db (status "waiting"), not a thread: the
`execute` call below keeps waiting for its result and continues the run when it is due.
A background thread plays the reviewer for document "d2" and sends the event.
"""

from __future__ import annotations

import contextlib
import threading
import time
from datetime import timedelta

import durable
from durable import WaitTimeout, execute, send, task, wait, workflow


@task
def request_review(doc_id: str) -> None:
    print(f"  review requested for {doc_id}")


@task
def escalate(doc_id: str) -> None:
    print(f"  no answer for {doc_id}: escalated")


@workflow
def approval(doc_id: str) -> str:
    request_review(doc_id)
    try:
        answer = wait("reviewed", timeout=timedelta(seconds=3))  # the event's payload
    except WaitTimeout:  # nobody answered in time (recorded: replay takes this branch)
        escalate(doc_id)
        return "escalated"
    return str(answer["verdict"])


def reviewer(run_id: str) -> None:
    """Answer after a second, from another thread (or process, or machine)."""
    time.sleep(1.0)
    # The second time this script runs, the run is long finished: nothing to answer.
    with contextlib.suppress(durable.errors.RunFinished):
        send(run_id, "reviewed", {"verdict": "approved"}, key="review-1")


if __name__ == "__main__":
    started = time.monotonic()
    print("d1:", execute(approval, "d1", id="approval-d1"))
    threading.Thread(target=reviewer, args=("approval-d2",)).start()
    print("d2:", execute(approval, "d2", id="approval-d2"))
    for run_id in ("approval-d1", "approval-d2"):
        kinds = [step.kind.value for step in durable.get_engine().backend.load_history(run_id)]
        print(f"history of {run_id}: {kinds}")
    print(f"took {time.monotonic() - started:.1f}s")
