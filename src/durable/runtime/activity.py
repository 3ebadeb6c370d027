"""A task attempt in progress: its time limits, its heartbeats, its run's cancellation.

While a task body runs, `current` holds a `TaskScope`, and for an attempt inside a run
its `Activity`. `durable.heartbeat(details)` reaches it. A call is cheap: it reads the
clock and compares; a write happens at the first call and then at most once per
interval (a third of the task's ``heartbeat``, or `INTERVAL` for a task that declares
none), never once per call. A write stores the latest details and the time, fenced by
the run's epoch and the attempt's number, and brings back the run's cancel request:

* cancelled, or past the run's deadline: the call raises `Cancelled` (``timed_out`` for
  the deadline; the body may clean up, and should let it propagate); the task's
  position records it, so replay raises it there;
* fenced (another owner took the run over): the call raises `LeaseLost`, and nothing
  this attempt does is recorded;
* past the attempt's end (``timeout``, or ``deadline`` for all attempts), or later
  than ``heartbeat`` after the previous call: the call raises `TaskTimeout`.

A sync body cannot be stopped from outside in Python: one that runs past its end
without calling heartbeat is found late when it returns (`Activity.late`), its result
dropped and the attempt recorded as timed out. An async body is cancelled at the end,
or at the run's deadline if that comes first (`Activity.expired`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from durable.errors import Cancelled, SerializationError, TaskTimeout

from .host import Host
from .pending import Pending

#: Seconds between heartbeat writes of a task that declares no ``heartbeat``.
INTERVAL = 10.0
#: The most heartbeat details may take, encoded as JSON.
DETAILS_LIMIT = 16 * 1024

#: The async task bodies awaited in this process now, by run id: a worker's lane
#: interrupts them when their run is cancelled (`Activity.interrupt`).
BODIES: dict[str, set[Activity]] = {}


@dataclass(slots=True)  # not frozen: one per attempt, made in 0.2 us instead of 1
class TaskScope:
    """Set while a task body runs: calls are plain, `task_key()` names the position."""

    run_id: str
    position: int
    attempt: int
    #: the task, and the run's workflow and parent (for `durable.info()`).
    task: str = ""
    workflow: str = ""
    parent_id: str | None = None
    #: the attempt's limits and heartbeats (None for a body run outside any attempt).
    activity: Activity | None = None
    #: the engine running the task: `send` from its body goes to its database.
    host: Host | None = None


class Activity:
    """One attempt of a task at its position: when it must end, when it next writes."""

    __slots__ = (
        "_backend", "_body", "_clock", "_dirty", "_due", "_gap", "_interval", "_last", "_latest",
        "_limits", "_stopped", "attempt", "ends_at", "epoch", "limit", "position", "previous",
        "run_deadline", "run_id", "task",
    )  # fmt: skip

    def __init__(
        self, host: Host, run_id: str, epoch: int, pending: Pending, run_deadline: float | None
    ) -> None:
        self._backend, self._clock = host.backend, host.clock
        self.run_id, self.epoch = run_id, epoch
        #: when the run must have ended (its deadline, not delivered yet), or None.
        self.run_deadline = run_deadline
        self.position, self.attempt = pending.position, pending.attempt
        self.task = pending.call.target.name
        self._limits = limits = pending.call.target.limits
        now = self._clock.now()
        #: when this attempt must have ended, and which limit says so.
        self.ends_at, self.limit = None, ""
        if limits.timeout is not None:
            self.ends_at, self.limit = now + limits.timeout, "timeout"
        if limits.deadline is not None:
            deadline = (pending.started or now) + limits.deadline
            if self.ends_at is None or deadline < self.ends_at:
                self.ends_at, self.limit = deadline, "deadline"
        self._gap = limits.heartbeat
        self._interval = INTERVAL if limits.heartbeat is None else limits.heartbeat / 3
        self._due = now  # the first heartbeat writes at once
        self._last = now  # the attempt's start counts as its first heartbeat
        self._latest: Any = None
        self._dirty = False
        #: the previous attempts' last details (JSON), for `durable.last_heartbeat()`.
        self.previous: bytes | None = pending.details
        self._body: asyncio.Task[Any] | None = None  # the task awaiting an async body
        self._stopped: Cancelled | None = None  # why `interrupt` cancelled it

    # -- async bodies, interrupted by their run's cancellation -------------------------

    def enter_body(self) -> None:
        """The asyncio task running now starts awaiting this attempt's async body."""
        self._body = asyncio.current_task()
        BODIES.setdefault(self.run_id, set()).add(self)

    def leave_body(self) -> None:
        """... and stopped awaiting it."""
        self._body = None
        bodies = BODIES.get(self.run_id)
        if bodies is not None:
            bodies.discard(self)
            if not bodies:
                del BODIES[self.run_id]

    def interrupt(self) -> None:
        """The run was cancelled: cancel the body where it awaits (call on its loop).
        It sees `asyncio.CancelledError`, may clean up, and the attempt ends with
        `Cancelled` (`interrupted`), as if its heartbeat had brought the request."""
        if self._body is not None and self._stopped is None:
            self._stopped = Cancelled(self.run_id)
            self._body.cancel("durable: the run was cancelled")

    def awaited_on(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether this attempt's async body is awaited on *loop* now."""
        body = self._body
        return body is not None and body.get_loop() is loop

    def interrupted(self) -> Cancelled | None:
        """The `Cancelled` a body cancelled by `interrupt` ends with (its asyncio
        cancellation taken back), or None if something else cancelled it."""
        stopped = self._stopped
        if stopped is not None and self._body is not None:
            self._body.uncancel()
        return stopped

    def beat(self, details: Any) -> None:
        """`durable.heartbeat(details)`: see the module docstring."""
        now = self._clock.now()
        if self.run_deadline is not None and now >= self.run_deadline:
            raise Cancelled(self.run_id, timed_out=True)
        if self.ends_at is not None and now >= self.ends_at:
            raise self.timeout(self.limit)
        if self._gap is not None and now - self._last > self._gap:
            raise self.timeout("heartbeat")
        self._last = now
        if details is not None:
            self._latest, self._dirty = details, True
        if now >= self._due:
            self._write(now)

    def _write(self, now: float) -> None:
        encoded = encode_details(self._latest) if self._dirty else None
        cancel = self._backend.heartbeat(
            self.run_id, self.position, self.epoch, self.attempt, encoded, gap=self._gap
        )
        self._dirty, self._due = False, now + self._interval
        if cancel:
            raise Cancelled(self.run_id)

    @property
    def details(self) -> bytes | None:
        """The latest details given (written or not) if they can be stored, for the
        next attempt; else the previous attempts' last ones."""
        if self._latest is not None:
            try:
                return encode_details(self._latest)
            except SerializationError:
                pass  # the heartbeat that writes them raises it to the body
        return self.previous

    def late(self) -> TaskTimeout | None:
        """After the body returned: the timeout it ran past, if it did."""
        if self.ends_at is not None and self._clock.now() > self.ends_at:
            return self.timeout(self.limit)
        return None

    def _run_deadline_first(self) -> bool:
        """Whether the run's deadline ends this attempt before (or with) its own limit."""
        deadline, ends = self.run_deadline, self.ends_at
        return deadline is not None and (ends is None or deadline <= ends)

    def remaining(self) -> float | None:
        """Seconds left before this attempt must end, at its own limit or at the run's
        deadline (an async body is cancelled then)."""
        ends = self.run_deadline if self._run_deadline_first() else self.ends_at
        return None if ends is None else max(0.0, ends - self._clock.now())

    def expired(self) -> BaseException:
        """What an async body cancelled at the end of `remaining` raises: `Cancelled`
        for the run's deadline, else the attempt's `TaskTimeout`."""
        if self._run_deadline_first():
            return Cancelled(self.run_id, timed_out=True)
        return self.timeout(self.limit)

    def timeout(self, limit: str) -> TaskTimeout:
        """The `TaskTimeout` of this attempt for *limit*."""
        seconds = getattr(self._limits, limit) or 0.0
        what = {
            "timeout": "ran past its timeout",
            "deadline": "ran past the deadline of all its attempts",
            "heartbeat": f"did not heartbeat for more than {self._gap:g}s"
            if self._gap is not None
            else "missed its heartbeat",
        }[limit]
        return TaskTimeout(
            f"Task {self.task!r} at position {self.position} (attempt {self.attempt}) {what}.",
            task=self.task,
            position=self.position,
            attempt=self.attempt,
            limit=limit,
            seconds=seconds,
        )


def hung(pending: Pending) -> TaskTimeout:
    """The `TaskTimeout` of the attempt found running at *pending* past its heartbeat
    deadline: its process hung or died, and this one took the run over."""
    task = pending.call.target
    gap = task.limits.heartbeat or 0.0
    return TaskTimeout(
        f"Task {task.name!r} at position {pending.position} (attempt {pending.attempt}) "
        f"did not heartbeat for more than {gap:g}s: its worker hung or died, and the run "
        "was taken over.",
        task=task.name,
        position=pending.position,
        attempt=pending.attempt,
        limit="heartbeat",
        seconds=gap,
    )


def encode_details(details: Any) -> bytes:
    """Heartbeat details as stored: JSON, at most `DETAILS_LIMIT` bytes.

    Raises:
        SerializationError: not JSON (dicts with string keys, lists, strings, finite
            numbers, booleans, None), or too large.
    """
    try:
        text = json.dumps(details, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise SerializationError(
            f"heartbeat details must be JSON (dicts with string keys, lists, strings, finite "
            f"numbers, booleans, None): {error}. Pass a small dict such as "
            '{"done": 40, "of": 100}.'
        ) from None
    encoded = b"j" + text.encode()
    if len(encoded) > DETAILS_LIMIT:
        raise SerializationError(
            f"heartbeat details take {len(encoded)} bytes as JSON, more than the "
            f"{DETAILS_LIMIT} allowed: keep a checkpoint small (an offset, a cursor, a "
            "count), and put bulk data where the task writes its results."
        )
    return encoded


def decode_details(data: bytes | None) -> Any:
    """Stored heartbeat details back as JSON values (None when there are none)."""
    if not data:
        return None
    return json.loads(data[1:] if data[:1] == b"j" else data)
