"""The records that cross the storage seam: runs and the steps of their history.

They are frozen values. Payload fields hold bytes already produced by `_serde`; backends
store them without looking inside.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any


class RunStatus(StrEnum):
    """Where a run is in its life."""

    #: created, waiting for an owner to start it.
    QUEUED = "queued"
    #: owned by a process that is executing it (or died doing so; see the lease).
    RUNNING = "running"
    #: suspended in a wait: for a time (``wake_at``), an event or another run
    #: (``waiting_on``). It holds no thread; it is queued again when the wait is over.
    WAITING = "waiting"
    #: its code no longer matches its history; resumes once the code is fixed.
    BLOCKED = "blocked"
    #: finished with a result.
    COMPLETED = "completed"
    #: finished with an error.
    FAILED = "failed"
    #: stopped by `cancel()`: never started, or ended by `Cancelled`.
    CANCELLED = "cancelled"
    #: given up: its owner died `max_recoveries` times while running it.
    DEAD = "dead"
    #: stopped at its deadline (its ``timeout``): ended by `Cancelled` with ``timed_out``.
    TIMED_OUT = "timed_out"
    #: halted by `pause()` at a durable call (or before starting, or in its wait): it
    #: holds no thread and is never claimed; `resume()` queues it again. What it waited
    #: for (``wake_at``, ``waiting_on``) is kept, and takes effect once resumed.
    PAUSED = "paused"
    #: ended by `continue_as_new()`: its successor (id `durable.core.chains.successor_id`)
    #: goes on with new arguments and a new history. Finished, like the outcomes above.
    CONTINUED = "continued"

    @property
    def finished(self) -> bool:
        """True for the terminal statuses, whose outcome never changes."""
        return self in _FINISHED


_FINISHED = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELLED,
        RunStatus.DEAD,
        RunStatus.TIMED_OUT,
        RunStatus.CONTINUED,
    }
)


class StepStatus(StrEnum):
    """The state of one history position."""

    #: a task attempt started (recorded before its body runs) and not finished yet: if
    #: its process died, the next execution makes another attempt at this position,
    #: and replay holds the code to the call recorded here, as for a finished step.
    RUNNING = "running"
    #: an attempt failed and another will follow (at ``wake_at``); the row will be updated.
    RETRYING = "retrying"
    #: a wait not over yet: its deadline (``wake_at``) is recorded; the row will be updated.
    WAITING = "waiting"
    #: finished with an output. Never changes again.
    COMPLETED = "completed"
    #: finished with an error. Never changes again.
    FAILED = "failed"

    #: True when the position's outcome is final (an attribute, not a property: it is
    #: asked several times at every step).
    finished: bool

    def __init__(self, value: str) -> None:
        self.finished = value in ("completed", "failed")


class StepKind(StrEnum):
    """What kind of durable call a history position records."""

    TASK = "task"
    WORKFLOW = "workflow"
    NOW = "now"
    UUID = "uuid4"
    RANDOM = "random"
    #: a child run started in the background; the output is its id.
    DISPATCH = "dispatch"
    #: waiting for a child run; the outcome is the child's.
    JOIN = "join"
    #: a durable sleep, for a duration or until a moment.
    SLEEP = "sleep"
    #: waiting for an event sent to the run; the outcome is its payload, or a timeout.
    EVENT = "event"
    #: an event sent from inside a workflow.
    SEND = "send"
    #: `durable.set_attributes()`: the attributes it set are its output.
    ATTRIBUTES = "attributes"
    #: the point where a cancellation request was delivered as `Cancelled`.
    CANCEL = "cancel"
    #: an event a workflow class's ``on_event`` handled there (its name, id and payload).
    HANDLER = "handler"
    #: the marker of `durable.patched(name)`: the run reached that point on code that
    #: has the patch, so it takes the new branch on every replay.
    PATCH = "patch"


#: What a run's owner is asked to do, as bits of one number (``cancel_requested`` in
#: the runs table): the owner learns them on its writes' way back, for free.
CANCEL_REQUEST = 1
PAUSE_REQUEST = 2

#: ``waiting_on`` of a run that any event wakes (a workflow class with ``on_event``),
#: before what its wait names, if anything: ``events|event:shipped``, ``events|``.
ANY_EVENT = "events|"


def requests(run: Run) -> int:
    """*run*'s requests (`CANCEL_REQUEST`, `PAUSE_REQUEST`) as bits."""
    return (CANCEL_REQUEST if run.cancel_requested else 0) | (
        PAUSE_REQUEST if run.pause_requested else 0
    )


def either(each: Iterable[int]) -> int:
    """The requests of several writes' answers, together."""
    flags = 0
    for one in each:
        flags |= one
    return flags


def awaited(waiting_on: str | None) -> tuple[str | None, bool]:
    """What *waiting_on* names (``event:<name>``, ``run:<id>``, or None), and whether
    any event wakes the run too (`ANY_EVENT`)."""
    if waiting_on is not None and waiting_on.startswith(ANY_EVENT):
        return waiting_on[len(ANY_EVENT) :] or None, True
    return waiting_on, False


@dataclass(frozen=True, slots=True, kw_only=True)
class NewRun:
    """A run to create. `owner` set means the creator starts executing it at once."""

    id: str
    workflow: str
    input: bytes
    call_hash: str
    owner: str | None
    lease: float
    parent_id: str | None = None
    queue: str = "default"
    priority: int = 0
    #: seconds the run may take from its creation (its deadline), or None: no deadline.
    timeout: float | None = None
    #: flow control: see `Run.key`, `Run.key_limit`.
    key: str | None = None
    key_limit: int | None = None
    #: a queued run that may not start before this moment (a jittered schedule tick):
    #: created WAITING with this ``wake_at``; None starts as soon as a worker claims it.
    start_at: float | None = None
    #: see `Run.version`, `Run.origin`.
    version: str | None = None
    origin: str | None = None
    #: what the run is searched by (`durable.core.attributes`), written with it.
    attributes: tuple[tuple[str, str | int | float | bool], ...] = ()
    #: see `Run.trace_context`, `Run.event_schemas`.
    trace_context: str | None = None
    event_schemas: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """A stored run. Times are seconds since the epoch, on the backend's clock."""

    id: str
    workflow: str
    status: RunStatus
    input: bytes
    call_hash: str
    output: bytes | None
    error: bytes | None
    epoch: int
    lease_owner: str | None
    lease_until: float | None
    recoveries: int
    parent_id: str | None
    created_at: float
    updated_at: float
    finished_at: float | None
    queue: str = "default"
    priority: int = 0
    started_at: float | None = None
    cancel_requested: bool = False
    #: when a WAITING run's wait is over (None: only an event or a run ends it).
    wake_at: float | None = None
    #: what a WAITING run waits for: ``event:<name>`` or ``run:<id>`` (None: a timer).
    waiting_on: str | None = None
    #: when the run must have ended: its ``timeout`` after ``created_at``.
    deadline_at: float | None = None
    #: the properties its code published as it ended (JSON), when its last stretch of
    #: code changed them; the earlier snapshots are on its steps (`Step.state`).
    state: bytes | None = None
    #: asked to pause while RUNNING: its owner parks it (PAUSED) at its next durable call.
    pause_requested: bool = False
    #: what runs that must not run together share (flow control), and the run's own
    #: limit on how many of them run at once (else its queue's ``key_concurrency``).
    key: str | None = None
    key_limit: int | None = None
    #: the code version of the process that created it (`configure(version=)`), or of
    #: the worker that first started it, if that worker declares one.
    version: str | None = None
    #: the run whose history this one's first positions were copied from (a fork).
    origin: str | None = None
    #: the W3C trace context (JSON: traceparent, tracestate) of the code that created
    #: it, where tracing is on: its executions' spans are children of that span.
    trace_context: str | None = None
    #: the JSON Schemas of the typed events its workflow declares (JSON text
    #: ``{event: schema}``, None: none declared): a sender without the code checks a
    #: payload against them before the run reaches its wait.
    event_schemas: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One position of a run's history."""

    run_id: str
    position: int
    kind: StepKind
    name: str
    call_hash: str
    status: StepStatus
    input: bytes | None = None
    output: bytes | None = None
    error: bytes | None = None
    attempts: int = 1
    started_at: float | None = None
    finished_at: float | None = None
    epoch: int = 0
    #: for a WAITING step, its deadline; for a RETRYING one, when the next attempt is due;
    #: for a RUNNING attempt of a task with ``heartbeat=``, when it counts as hung (its
    #: start or last heartbeat write plus that gap): the sweep then takes the run over.
    wake_at: float | None = None
    #: a RUNNING task attempt's last `durable.heartbeat()` write (None before the first).
    heartbeat_at: float | None = None
    #: the details the task's last written heartbeat carried (JSON), kept across its
    #: attempts: what `durable.last_heartbeat()` returns to the next attempt.
    details: bytes | None = None
    #: the properties the workflow published (JSON: its instance's attributes, or what
    #: `durable.set_state` set), when they changed in the code that ended here: a
    #: snapshot for readers (`Handle.state()`), never read by replay.
    state: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunQuery:
    """Which runs to list or count (`Backend.list_runs`); unset fields match all."""

    workflow: str | None = None
    statuses: tuple[RunStatus, ...] = ()
    queue: str | None = None
    #: created at or after this moment (seconds since the epoch).
    since: float | None = None
    #: created before this moment.
    until: float | None = None
    parent_id: str | None = None
    #: a substring of the run id: case-sensitive, every character literal.
    id_contains: str | None = None
    #: the page after this run, as (created_at, id): the last one of the previous page.
    after: tuple[float, str] | None = None
    #: runs stamped with this code version (`Run.version`).
    version: str | None = None
    #: runs holding every one of these attributes: (key, canonical text) pairs.
    attributes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How one run or task call stands or ended, for statistics. *retried*: an earlier
    attempt whose outcome an operator's retry erased (the run, or the call, went on)."""

    name: str
    status: str
    started_at: float | None
    finished_at: float | None
    retried: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Action:
    """An operator's action on a run (start, cancel, retry, send): who, what, when."""

    id: int
    run_id: str
    action: str
    actor: str | None
    at: float
    #: JSON text: what the action was given or changed.
    detail: str


def _fill_step(
    self: Step,
    *,
    run_id: str,
    position: int,
    kind: StepKind,
    name: str,
    call_hash: str,
    status: StepStatus,
    input: bytes | None = None,
    output: bytes | None = None,
    error: bytes | None = None,
    attempts: int = 1,
    started_at: float | None = None,
    finished_at: float | None = None,
    epoch: int = 0,
    wake_at: float | None = None,
    heartbeat_at: float | None = None,
    details: bytes | None = None,
    state: bytes | None = None,
) -> None:
    """Step's constructor: the same signature as the dataclass's, but it fills the
    slots through their descriptors instead of ``object.__setattr__`` one by one, which
    costs a frozen dataclass about 1 us of the 3 a Step takes. A task step makes two
    (its start and its result), on the hottest path there is."""
    a, b, c, d, e, f, g, h, i, j, k, m, n, o, p, q, r = STEP_SETTERS
    a(self, run_id)
    b(self, position)
    c(self, kind)
    d(self, name)
    e(self, call_hash)
    f(self, status)
    g(self, input)
    h(self, output)
    i(self, error)
    j(self, attempts)
    k(self, started_at)
    m(self, finished_at)
    n(self, epoch)
    o(self, wake_at)
    p(self, heartbeat_at)
    q(self, details)
    r(self, state)


#: Step's slots' setters, in field order (= `durable_history`'s columns): `_fill_step`
#: unpacks them, `evolve` copies through them, `backends._rows.step` fills rows with them.
STEP_SETTERS = tuple(getattr(Step, field.name).__set__ for field in fields(Step))
setattr(Step, "__init__", _fill_step)  # noqa: B010 - mypy keeps the dataclass's signature
_STEP_COPY = tuple(
    (field.name, getattr(Step, field.name).__get__, put)
    for field, put in zip(fields(Step), STEP_SETTERS, strict=True)
)


def evolve(step: Step, **changes: Any) -> Step:
    """`dataclasses.replace` for a Step, slot by slot: 3 us instead of 5, on paths that
    copy a step per write (a properties snapshot stamped on it)."""
    made = Step.__new__(Step)
    for name, get, put in _STEP_COPY:
        put(made, changes[name] if name in changes else get(step))
    return made
