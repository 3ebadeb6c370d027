"""`continue_as_new`: a long-lived workflow starts its next run with a fresh history."""

from __future__ import annotations

from typing import Any, NoReturn

from durable.errors import DurableError
from durable.runtime import continuing
from durable.runtime.activity import TaskScope
from durable.runtime.context import RunContext, current


def continue_as_new(*args: Any, **kwargs: Any) -> NoReturn:
    """End this run here and go on in a new run of the same workflow, called with
    *args* and *kwargs*: a loop that runs forever keeps a bounded history.

    Atomically, the run ends ``continued`` and its successor is queued, with the same
    queue, priority, key, timeout and version, and the id ``<id>~1`` (then ``~2``...;
    see docs/concepts/continue-as-new.md). Events not consumed yet and unfinished
    children move to the successor. `Handle.result()`, `execute` and `wait(handle)`
    follow the chain to its last run's outcome; `send` to any id of the chain reaches
    its current run. The call does not return; code after it (and in ``finally``
    blocks) makes no durable call.

    Raises:
        DurableError: outside a workflow, in a task body, or in a child run (started
            by another workflow: not supported).
        TypeError: the arguments do not fit the workflow's signature.
        SerializationError: an argument cannot be stored.

        Raised by the call, into the workflow: uncaught, the run fails with it, and
        nothing else changes.
    """
    context = current.get()
    if isinstance(context, TaskScope):
        raise DurableError(
            "continue_as_new() ends a workflow's run; a task body cannot call it. Return "
            "what the workflow needs, and call continue_as_new() in the workflow."
        )
    if not isinstance(context, RunContext):
        raise DurableError(
            "continue_as_new() is called inside a workflow, to start its next run; here "
            "no workflow runs. To start a run, call execute() or dispatch()."
        )
    continuing.request(context, args, kwargs)
