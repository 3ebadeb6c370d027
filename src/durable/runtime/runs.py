"""Runs in this process: create one, take one over, resume one, execute a child inline.

Each function takes the `Host` it works for and drives `execution.py` below it. The
engine's public operations (`execute_call`, `recover`, a worker's claims) and child
workflows (`children.py`) are built from these.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from durable.core import event_schemas
from durable.core.attributes import check_attributes
from durable.core.functions import Call, Durable
from durable.core.hashing import call_hash
from durable.core.ids import new_run_id
from durable.core.records import NewRun, Run, RunStatus, StepKind
from durable.core.run_options import (
    check_debounce,
    check_key,
    check_key_limit,
    check_priority,
    check_queue,
    check_run_id,
    check_timeout,
)
from durable.errors import (
    Cancelled,
    IdempotencyConflict,
    PayloadError,
    RunDead,
    SerializationError,
    StorageError,
)

from . import owners
from .execution import drive, drive_async
from .host import Host
from .loops import off_loop
from .stops import RELEASED

log = logging.getLogger("durable")


#: A debounced run starts at most this many windows after the first dispatch it
#: coalesced, however often it is dispatched again: a steady stream cannot starve it.
DEBOUNCE_LONGEST = 10


def create(
    host: Host,
    call: Call[Any],
    run_id: str | None,
    parent_id: str | None,
    *,
    owner: str | None,
    queue: str = "default",
    priority: int = 0,
    timeout: object = None,
    key: str | None = None,
    key_concurrency: int | None = None,
    debounce: object = None,
    connection: object = None,
    attributes: object = None,
) -> tuple[Run, bool]:
    """Store *call* as a run (RUNNING under *owner*, or QUEUED without one), unless a
    run with *run_id* exists: then return that one, and False.

    A *run_id* without a *parent_id* is the user's choice, so it is checked
    (`check_run_id`: never a child's form); with a parent, it is the child's own id.
    The run's deadline is *timeout* (or its workflow's ``@workflow(timeout=...)``)
    from now; an existing run keeps its own. *key*, *key_concurrency* and *debounce*
    are flow control (see `durable.dispatch`): with *debounce*, the run is coalesced
    with the pending one of its workflow and key (`QueueStore.debounce_run`). With a
    *connection*, the run is inserted in the caller's transaction
    (`RunStore.create_run_in`). *attributes* (a mapping, checked) are written with the
    run if this creates it.

    Raises:
        TypeError, ValueError: the id, queue, priority or timeout is not one a run can
            have; nothing was written.
        SerializationError: an argument cannot be stored; nothing was written.
        InvalidValue: *run_id* or *queue* is text no database can store (a NUL).
        IdempotencyConflict: *run_id* belongs to a run of another call, or, for a
            child, to a run that is not a child of *parent_id*.
    """
    if run_id is not None and parent_id is None:
        check_run_id(run_id)
    check_queue(queue)
    check_priority(priority)
    check_key(key)
    check_key_limit(key_concurrency, key)
    window = check_debounce(debounce, key)
    pairs = () if attributes is None else check_attributes(attributes, limit=host.max_attributes)
    if pairs and window is not None:
        raise TypeError(
            "attributes= names one run, and debounce= merges many into one: give the "
            "debounced run no attributes= (set them from its workflow with "
            "durable.set_attributes)."
        )
    if window is not None and (run_id is not None or parent_id is not None or owner):
        raise TypeError(
            "debounce= lets the dispatches of one key share a run, so it picks the run: "
            "give no id=, and dispatch from application code, not inside a workflow."
        )
    if connection is not None:
        check_outbox(owner, parent_id, key_concurrency, window)
    new = prepare(
        host, call, run_id, parent_id, owner=owner, queue=queue, priority=priority,
        timeout=timeout, key=key, key_concurrency=key_concurrency,
    )  # fmt: skip
    if pairs:
        new = dataclasses.replace(new, attributes=pairs)
    target = call.target
    digest = new.call_hash
    if window is not None:
        run, created = host.backend.debounce_run(
            new, window=window, longest=DEBOUNCE_LONGEST * window
        )
    elif connection is not None:  # observed as created once the caller commits it
        committed = host.observers.created if host.observers else None
        run, created = host.backend.create_run_in(new, connection, committed=committed)
    else:
        run, created = host.backend.create_run(new)
    if created and host.observers and connection is None:
        host.observers.created(run)
    if window is not None:
        return run, created
    if not created and parent_id is not None and run.parent_id != parent_id:
        raise IdempotencyConflict(foreign_child(run, parent_id), run_id=run.id)
    if not created and (run.workflow != target.name or run.call_hash != digest):
        raise IdempotencyConflict(
            f"Run {run.id!r} already exists for {run.workflow} with other arguments "
            f"({run.call_hash}), so it cannot be used for {target.name} ({digest}). "
            "Use a different id, or the same call to join the existing run.",
            run_id=run.id,
        )
    return run, created


def check_outbox(
    owner: str | None, parent_id: str | None, key_concurrency: int | None, window: object
) -> None:
    """Refuse what a run inserted in the caller's transaction cannot have."""
    if owner is not None or parent_id is not None:
        raise TypeError("connection= is for dispatch from application code only.")
    if key_concurrency is not None or window is not None:
        raise TypeError(
            "connection= cannot be combined with key_concurrency= or debounce=: both "
            "write outside one insert (the queue's limit, the shared pending run). "
            "Declare the key's limit with durable.queue(..., key_concurrency=N) instead, "
            "or dispatch without connection=."
        )


def prepare(
    host: Host,
    call: Call[Any],
    run_id: str | None,
    parent_id: str | None,
    *,
    owner: str | None,
    queue: str,
    priority: int,
    timeout: object = None,
    key: str | None = None,
    key_concurrency: int | None = None,
) -> NewRun:
    """The run `create` stores for *call* (its options already checked): its payload,
    call hash, id and deadline.

    Raises:
        ValueError: *timeout* is not a positive duration.
        SerializationError: an argument cannot be stored.
    """
    target = call.target
    limit = check_timeout(timeout)
    if limit is None and target.kind is StepKind.WORKFLOW:
        limit = target.limits.timeout
    try:
        payload = host.dump(
            {"args": list(call.args), "kwargs": call.kwargs},
            f"the arguments of {target.kind.value} {target.name!r}",
        )
    except SerializationError:
        _name_bad_argument(host, call)
        raise
    digest = call_hash(target.kind, target.name, call.arguments)
    return NewRun(
        id=run_id or new_run_id(),
        workflow=target.name,
        input=payload,
        call_hash=digest,
        owner=owner,
        lease=host.lease,
        parent_id=parent_id,
        queue=queue,
        priority=priority,
        timeout=limit,
        key=key,
        key_limit=key_concurrency,
        version=host.version,
        trace_context=host.observers.carrier() if host.observers else None,
        event_schemas=event_schemas.declared_json(target.events),
    )


def foreign_child(run: Run, parent_id: str) -> str:
    """Why *run* cannot be the child of *parent_id* whose id it holds."""
    owner = f"a child of run {run.parent_id!r}" if run.parent_id else "a run of its own"
    return (
        f"Run {run.id!r} already exists and is not a child of run {parent_id!r} ({owner}, "
        f"of {run.workflow}), so run {parent_id!r} cannot start its child under that id. "
        "Someone created it with an id of a child's form (<parent id>/<position>), "
        "which older versions allowed. Cancel and purge that run, or start this "
        "workflow again under another id; then retry this run."
    )


def _name_bad_argument(host: Host, call: Call[Any]) -> None:
    """Raise a SerializationError that names the first argument that cannot be stored."""
    for name, value in call.arguments.items():
        host.dump(value, f"argument {name!r} of {call.target.kind.value} {call.target.name!r}")


def claim(host: Host, run: Run) -> Run | None:
    """Take *run* over if its owner is gone (or it waits for one); None if someone
    else has it, or it is of a version this host does not serve (``only_version``).
    A run whose owners keep dying is given up instead (status DEAD)."""
    dead = run.lease_owner if owners.is_dead(run.lease_owner) else None
    claimed = host.backend.claim_run(
        run.id,
        owner=host.owner,
        lease=host.lease,
        epoch=run.epoch,
        dead_owner=dead,
        version=host.version,
        only_version=host.only_version,
    )
    if claimed is None or claimed.recoveries < host.max_recoveries:
        return claimed
    error = RunDead(
        f"Run {run.id!r} was given up: its owner died {claimed.recoveries} times while "
        "running it (max_recoveries). A task probably crashes its process (out of memory, "
        "a native crash, os._exit). Fix the cause, then retry the run.",
        run_id=run.id,
        recoveries=claimed.recoveries,
    )
    host.backend.finish_run(claimed.id, claimed.epoch, RunStatus.DEAD, error=host.dump_error(error))
    log.error("%s", error)
    return host.reread(run.id)


def resume(host: Host, run: Run, target: Durable[..., Any]) -> Any:
    """Continue a run this host has just claimed, replaying its history, until it ends
    or stops without an outcome (`RELEASED`)."""
    return execute(host, run, _stored_call(host, run, target), replay=_replays(run))


async def resume_async(host: Host, run: Run, target: Durable[..., Any]) -> Any:
    """`resume` for an async workflow, on the current loop (a worker's lane): its
    storage calls off the loop (`loops.off_loop`)."""
    call = _stored_call(host, run, target)  # writes only to fail a run whose input is bad
    try:
        history = await off_loop(host.backend.load_history, run.id) if _replays(run) else ()
    except StorageError:
        await off_loop(host.release_quietly, run)
        raise
    return await drive_async(host, run, call, history)


def _replays(run: Run) -> bool:
    """A run at its first epoch has never executed: it has no history to load, unless
    it is a fork, whose history starts with the steps copied from its origin."""
    return run.epoch > 1 or run.origin is not None


def _stored_call(host: Host, run: Run, target: Durable[..., Any]) -> Call[Any]:
    """The call run *run* was created with, from its stored input; a bad one fails it."""
    try:
        stored = host.load(run.input, run.id, None)
        call = Call(target, tuple(stored["args"]), stored["kwargs"], {})
        call.arguments = target.bind_arguments(call.args, call.kwargs)
    except Exception as error:  # whatever the stored input is, it fails only this run
        bad = error if isinstance(error, PayloadError) else PayloadError(
            f"The stored input of run {run.id!r} does not fit {target.name}: {error}.",
            run_id=run.id, position=None,
        )  # fmt: skip
        host.backend.finish_run(run.id, run.epoch, RunStatus.FAILED, error=host.dump_error(bad))
        raise bad from None
    return call


def resume_quietly(host: Host, run: Run, target: Durable[..., Any]) -> None:
    """`resume`, logging the outcome instead of raising it (it is recorded anyway)."""
    try:
        resume(host, run, target)
    except BaseException as error:
        report(run, error)


def report(run: Run, error: BaseException) -> None:
    """Log the error an execution of *run* for a worker ended with (its outcome is
    recorded anyway; a worker has no caller to raise it to)."""
    if isinstance(error, PayloadError):  # a corrupt or refused row: worth a look
        log.error("run %s failed: %s", run.id, error)
    elif isinstance(error, Exception | Cancelled):
        log.info("run %s ended with %s: %s", run.id, type(error).__name__, error)
    else:
        log.error("run %s: execution interrupted", run.id, exc_info=error)


def execute(host: Host, run: Run, call: Call[Any], *, replay: bool) -> Any:
    """`drive` *run* here, replaying its history first if it has one.

    If the database fails before the run has an outcome, the run is handed back:
    left RUNNING under this owner, it would have its lease renewed with the others
    this host holds, and stay stranded (see `Leases.release_quietly`).
    """
    try:
        history = host.backend.load_history(run.id) if replay else ()
        return drive(host, run, call, history)
    except StorageError:
        host.release_quietly(run)  # fenced: a no-op once it has an outcome or a new owner
        raise


def step_in(host: Host, run: Run, target: Durable[..., Any]) -> Any:
    """An existing child run, once: its outcome if it has finished, else execute it
    here if nobody else is; `RELEASED` if it must be waited for."""
    if run.status.finished:
        return host.outcome(run)
    claimed = claim(host, run) if not host.executing(run.id) else None
    if claimed is None or claimed.status is not RunStatus.RUNNING:
        return RELEASED if claimed is None else step_in(host, claimed, target)
    return resume(host, claimed, target)


def execute_child(host: Host, call: Call[Any], *, run_id: str, parent_id: str, queue: str) -> Any:
    """Run a workflow's child inline, as its own run: its outcome, or `RELEASED` when
    the child has to wait or runs elsewhere (the parent then waits for it)."""
    run, created = create(host, call, run_id, parent_id, owner=host.owner, queue=queue)
    if created:
        return execute(host, run, call, replay=False)
    return step_in(host, run, call.target)


async def execute_child_async(
    host: Host, call: Call[Any], *, run_id: str, parent_id: str, queue: str
) -> Any:
    """`execute_child` for async workflows: an async child runs on the current loop."""
    if not call.target.is_async:
        return await asyncio.to_thread(
            execute_child, host, call, run_id=run_id, parent_id=parent_id, queue=queue
        )
    run, created = create(host, call, run_id, parent_id, owner=host.owner, queue=queue)
    if created:
        return await drive_async(host, run, call)
    return await asyncio.to_thread(step_in, host, run, call.target)
