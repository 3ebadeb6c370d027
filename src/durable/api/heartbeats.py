"""`heartbeat()` and `last_heartbeat()`: a long task body's liveness, progress and
checkpoint (see `runtime/activity.py` for what a heartbeat does).

Where they may be called:

* in a task body that a workflow runs: as documented below;
* in a task body called as a plain function (no run at all, e.g. in a unit test):
  `heartbeat` does nothing and `last_heartbeat` returns None, so the same body runs
  unchanged outside durable;
* in workflow code: both raise `DurableError` (a heartbeat belongs to one attempt of a
  task; workflow code is replayed and never "runs long").
"""

from __future__ import annotations

from typing import Any

from durable.errors import DurableError
from durable.runtime.activity import TaskScope, decode_details
from durable.runtime.context import RunContext, current


def heartbeat(details: Any = None) -> None:
    """Say that this task attempt is alive, and optionally how far it got.

    Cheap in a tight loop: it writes at its first call and then at most once per
    interval (a third of the task's ``heartbeat=``, or 10 s), never once per call. The
    latest *details* (JSON: a dict such as ``{"done": 40, "of": 100}``, at most 16 KiB)
    are stored with the write; operators see them (a progress bar for ``done``/``of``
    or a 0-1 ``progress``), and the next attempt gets them from `last_heartbeat`.

    Raises:
        Cancelled: the run was cancelled: clean up and let it propagate.
        TaskTimeout: this attempt ran past its ``timeout``/``deadline``, or called
            heartbeat later than its ``heartbeat=`` after the previous call.
        LeaseLost: another owner took the run over; nothing this attempt does counts.
        SerializationError: *details* are not JSON or too large (when written).
        DurableError: called in workflow code.
    """
    context = current.get()
    if isinstance(context, TaskScope):
        if context.activity is not None:
            context.activity.beat(details)
        return
    if isinstance(context, RunContext):
        raise DurableError(
            "heartbeat() is for task bodies: it reports one attempt of a long task. "
            "Workflow code is replayed and only waits; call heartbeat() inside the @task."
        )


def last_heartbeat() -> Any:
    """The details of the last heartbeat stored by an earlier attempt of this task (the
    one that failed, timed out or died), or None: where a long task resumes from.

    Raises:
        DurableError: called in workflow code.
    """
    context = current.get()
    if isinstance(context, TaskScope):
        activity = context.activity
        return None if activity is None else decode_details(activity.previous)
    if isinstance(context, RunContext):
        raise DurableError(
            "last_heartbeat() is for task bodies: it returns what an earlier attempt of "
            "the task stored with durable.heartbeat(). Call it inside the @task."
        )
    return None
