"""Continue-as-new in a run: the request at the call, and the successor it names.

`request` checks the call where the workflow makes it (a child run, arguments that do
not fit the workflow or cannot be stored: raised there, into the workflow, and nothing
changes), then unwinds the workflow with `ContinueAsNew`. The execution
(`execution.py`) hands the chain over with `successor`: one commit makes the run
CONTINUED and its successor QUEUED (`RunStore.continue_run`). No position is taken:
a replay after a crash before that commit reaches the same call and hands over again,
to the same successor id (`durable.core.chains`).
"""

from __future__ import annotations

from typing import Any, NoReturn

from durable.core import event_schemas
from durable.core.chains import successor_id
from durable.core.hashing import call_hash
from durable.core.records import NewRun, Run, StepKind
from durable.errors import DurableError, SerializationError

from . import registry
from .context import RunContext
from .stops import ContinueAsNew


def request(context: RunContext, args: tuple[Any, ...], kwargs: dict[str, Any]) -> NoReturn:
    """End this run's history here and go on in a successor run called with *args* and
    *kwargs*: raises `ContinueAsNew` (poisoning the context, so that no durable call
    runs after it, in ``finally`` blocks either).

    Raises:
        DurableError: the run is a child run (started by another workflow).
        TypeError: the arguments do not fit the workflow's signature.
        SerializationError: an argument cannot be stored.
    """
    context.check()
    if context.parent_id is not None:
        raise DurableError(
            f"continue_as_new() is not supported in a child run: run {context.run_id!r} "
            f"was started by run {context.parent_id!r}, which waits for its outcome (or "
            "keeps it in its family). Loop in the child, return to the parent and let the "
            "parent continue as new, or start a top-level run from a task (durable.dispatch"
            "(..., id=durable.task_key()) in a task body: a run of its own, started once)."
        )
    target = registry.find(context.workflow)
    if target is None:  # it is executing, so it was registered: never, but say so
        raise DurableError(f"Workflow {context.workflow!r} is not registered in this process.")
    arguments = target.bind_arguments(args, kwargs)
    host = context.host
    try:
        payload = host.dump(
            {"args": list(args), "kwargs": kwargs},
            f"the arguments of continue_as_new() in run {context.run_id!r} ({target.name})",
        )
    except SerializationError:
        for name, value in arguments.items():
            host.dump(value, f"argument {name!r} of continue_as_new() ({target.name})")
        raise
    raise context.poison(
        ContinueAsNew(payload, call_hash(StepKind.WORKFLOW, target.name, arguments))
    )


def successor(run: Run, handover: ContinueAsNew) -> NewRun:
    """The run that continues *run*: its workflow, queue, priority, key and timeout,
    with the new arguments; QUEUED (no owner), of no version: a new link may start on
    a new deploy (an ``--only-version`` worker of any version takes it), which is how
    a chain that never ends moves to new code. Its event schemas are those the code
    here declares (the run executes here, so it is registered), else *run*'s."""
    target = registry.find(run.workflow)
    schemas = run.event_schemas if target is None else event_schemas.declared_json(target.events)
    timeout = None
    if run.deadline_at is not None:
        timeout = round(run.deadline_at - run.created_at, 3)
    return NewRun(
        id=successor_id(run.id),
        workflow=run.workflow,
        input=handover.input,
        call_hash=handover.call_hash,
        owner=None,
        lease=0.0,
        queue=run.queue,
        priority=run.priority,
        timeout=timeout,
        key=run.key,
        key_limit=run.key_limit,
        trace_context=run.trace_context,  # each link's spans: under the chain's creator
        event_schemas=schemas,
    )
