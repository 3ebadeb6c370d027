"""One run executing in this process: durable calls meet the replay cursor and storage.

`RunContext` is what `current` holds while a workflow body runs. Each durable call
takes a position, asks the cursor whether it is recorded, and either replays the
recorded outcome or runs the call and records it with one fenced write. Which call
runs how is decided above, in `calls.py`: tasks and their retries (`tasks.py`), child
workflows and dispatch (`children.py`), waits and sends (`waits.py`).

Some conditions end an execution early, whatever the workflow code does:

* divergence from the history (`NondeterminismError`) or an unreadable row
  (`PayloadError`): raised into the workflow and remembered, so that every later
  durable call raises it again and the run ends blocked or failed;
* a lost lease, a storage failure, or the worker draining for shutdown: `Abandoned`
  (a BaseException) unwinds the workflow; nothing more is written here;
* a wait that is not over: `Suspend` (a BaseException) unwinds the workflow, and the
  run is stored WAITING until the wait is over; then it is replayed up to that wait.

A cancellation request, or the run's deadline, is delivered once, as `Cancelled`: by
the durable call that was in flight when it arrived, once that call's outcome is
recorded (`returned`), or else at the next durable call that has no outcome yet (a new
call, or a wait or retry in progress). The delivery point is recorded, so replay raises
it at the same place; the calls made after it (in ``finally``, in ``except Cancelled``)
run normally (see `interrupts.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from durable.core import faults
from durable.core.functions import Call
from durable.core.hashing import call_hash
from durable.core.records import CANCEL_REQUEST, Run, Step, StepKind, StepStatus
from durable.core.replay import Replay, describe
from durable.errors import (
    Cancelled,
    InvalidValue,
    LeaseLost,
    NondeterminismError,
    PayloadError,
    SerializationError,
    StorageError,
)

from .activity import TaskScope
from .hooks import Branches, Hooks
from .host import Host
from .interrupts import ON_RETURN, Interrupts
from .pending import UNSET, Pending
from .properties import Properties
from .stops import Abandoned, Park, Suspend
from .turns import COUNTED, Turns

#: Where am I? The live run (inside a workflow body), a task scope (inside a task body,
#: where calls are plain again), or nothing (application code).
current: ContextVar[RunContext | TaskScope | None] = ContextVar("durable_current", default=None)


def current_run() -> RunContext | None:
    """The run executing in this context, if any."""
    context = current.get()
    return context if isinstance(context, RunContext) else None


class RunContext:
    """The live state of one run: cursor, epoch, and the host it writes through."""

    def __init__(self, host: Host, run: Run, history: Sequence[Step]) -> None:
        self.host = host
        #: the runs to hand back at their next durable call (a worker shutting down).
        self._draining = host.leases.draining
        self.run_id = run.id
        self.workflow = run.workflow
        self.parent_id = run.parent_id
        self.epoch = run.epoch
        self.queue = run.queue
        self.replay = Replay(run.id, history)
        #: the divergence, unreadable row or abandonment that ends this execution.
        self.fatal: BaseException | None = None
        #: its cancel request and deadline, and whether one was delivered.
        self.interrupts = Interrupts(run, host.clock)
        #: the order in which async durable calls hand their outcomes back.
        self.turns = Turns()
        if COUNTED.get():
            self.turns.counted()
        #: called with the position of a durable call that has no recorded outcome, before
        #: it runs: `durable.testing.replay` stops there (it only checks the history).
        self.frontier: Callable[[int, str], None] | None = None
        #: a task's result not written yet: it goes with the next task's start, in one
        #: commit (`begin`), or alone before any other durable call (`flush`).
        self._deferred: Step | None = None
        self._flushing = threading.Lock()
        #: what the run publishes for readers (`publish`), once it does.
        self.properties: Properties | None = None
        #: a workflow class's task hooks, if it defines any (see `hooks.py`).
        self.hooks: Hooks | None = None
        #: ... and its ``on_event``, if it defines one (see `handlers.py`).
        self.events: Branches | None = None
        #: stream name -> [the next write's number, how many are stored] (`streams.py`).
        self.streams: dict[str, list[int]] = {}
        #: `durable.patched` ids met in this execution: where, and the branch taken.
        self.patches: dict[str, tuple[str, bool]] = {}
        #: taken over from an owner that died; the count resets once this run progresses.
        self._recovering = run.recoveries > 0
        if self._recovering:
            host.leases.unproven.add(run.id)

    # -- positions -------------------------------------------------------------------

    def allocate(self, count: int = 1, *, task: bool = False) -> int:
        """Take the next *count* positions; deliver a pending cancellation there instead.

        *task*: the call is one synchronous task, whose start may carry the result still
        deferred (`begin`); any other call writes that result first.
        """
        if self._deferred is not None and not (task and count == 1):
            self.flush()
        self.check()
        if self.run_id in self._draining:
            raise self.poison(Abandoned(None))
        if self.interrupts.pause and not self.interrupts.requested:
            self.flush()  # a task's result still deferred is kept, then the run parks
            raise self.poison(Park())
        if self.events is not None:
            self.events.at_boundary()
        first = self.replay.allocate(count)
        recorded = self.replay.recorded(first)
        if recorded is not None and recorded.kind is StepKind.CANCEL:
            raise self.interrupts.replayed(recorded)
        unfinished = recorded is None or not recorded.status.finished
        if unfinished and self.interrupts.due():
            raise self.stop_at(first)
        return first

    def returned(self) -> None:
        """A durable call is handing its outcome to the workflow code: a cancellation
        that arrived while it was in flight is raised here, where the workflow can still
        react to it (its ``finally`` blocks, its ``except Cancelled``), rather than at
        whatever durable call comes next, which may be the cleanup itself."""
        if self.interrupts.delivered or self.fatal is not None:
            return
        position = self.replay.next_position
        recorded = self.replay.recorded(position)
        # A start there (its body never ran, or its process died) is no outcome yet.
        if recorded is None or recorded.status is StepStatus.RUNNING:
            if self.interrupts.due():
                self.replay.allocate()
                raise self.stop_at(position, on_return=True)
        elif recorded.kind is StepKind.CANCEL and recorded.name in ON_RETURN:
            self.replay.allocate()
            raise self.interrupts.replayed(recorded)

    def stop_at(self, position: int, *, on_return: bool = False) -> Cancelled:
        """Deliver the due cancellation or deadline at *position* (recording where);
        return the `Cancelled` to raise."""
        marker, cancelled = self.interrupts.deliver(position, self.epoch, on_return=on_return)
        self.record(marker)
        return cancelled

    def check(self) -> None:
        """Raise the fatal condition, if any: once set, no durable call may proceed."""
        if self.fatal is not None:
            raise self.fatal

    def poison(self, error: BaseException) -> BaseException:
        """Remember the first fatal condition; return what to raise now."""
        if isinstance(error, LeaseLost | StorageError):
            error = Abandoned(error)
        if self.fatal is None or isinstance(self.fatal, Suspend):
            self.fatal = error  # anything else outranks waiting
        return error

    # -- waiting -----------------------------------------------------------------------

    def suspend(self, wake_at: float | None, waiting_on: str | None) -> BaseException:
        """This run must wait (see `Suspend`), at most until its deadline; return what to
        raise now."""
        wake_at = self.interrupts.cap(wake_at)
        self.progressed()  # a wait reached: waiting cannot be what kills this process
        fatal = self.fatal
        if isinstance(fatal, Suspend):
            fatal.merge(wake_at, waiting_on)
            return fatal
        if fatal is not None:
            return fatal
        self.fatal = Suspend(wake_at, waiting_on)
        return self.fatal

    # -- one position ------------------------------------------------------------------

    def decide(self, position: int, kind: StepKind, name: str, digest: str) -> Step | None:
        """The recorded step at *position* for this call, or None; poisons on divergence."""
        try:
            recorded = self.replay.decide(position, kind, name, digest)
        except NondeterminismError as error:
            raise self.poison(error) from None
        if self.frontier is not None and (recorded is None or not recorded.status.finished):
            self.frontier(position, describe(kind, name, digest))
        return recorded

    def frontier_for(self, position: int, call: Call[Any]) -> Pending | Step:
        """The recorded finished step to replay, or the pending call to run."""
        target = call.target
        digest = call_hash(target.kind, target.name, call.arguments)
        recorded = self.decide(position, target.kind, target.name, digest)
        if recorded is not None and recorded.status.finished:
            return recorded
        return Pending(position, call, digest, recorded)

    def replayed(self, step: Step) -> Any:
        """Return (or raise) the recorded outcome of a finished step."""
        try:
            if step.status is StepStatus.COMPLETED:
                return self.host.load(step.output or b"", self.run_id, step.position)
            error = self.host.load_error(step.error or b"", self.run_id, step.position)
        except PayloadError as bad:
            raise self.poison(bad) from None
        if isinstance(error, Cancelled):
            self.interrupts.caught(error)  # a Cancelled reached this workflow: that was it
        raise error

    # -- outcomes ------------------------------------------------------------------------

    def attempt(self, pending: Pending) -> int:
        """Start one more attempt at *pending*; return its number (from 1)."""
        pending.start(self.host.clock.now())
        return pending.next_attempt()

    def begin(self, pending: Pending) -> Step | None:
        """Start one more attempt at *pending*: count it and record it RUNNING before
        the body runs (with the result still deferred, if any: one commit for both).

        Returns:
            None to run the body; or the finished step found at the position (written
            by an earlier attempt of this write whose acknowledgement was lost), to
            replay instead.
        """
        now = self.host.clock.now()
        pending.start(now)
        pending.next_attempt()
        gap = pending.call.target.limits.heartbeat  # hung unless it heartbeats by then
        running = self.step_for(
            pending, StepStatus.RUNNING, wake_at=None if gap is None else now + gap
        )
        stored = self.record(running)
        if stored.status.finished:
            return stored
        if self.interrupts.pause and not self.interrupts.requested:
            raise self.poison(Park())  # started, not run: resumed, it is made again
        return None

    def take_deferred(self) -> Step | None:
        """The deferred result, for the caller to write with the run's outcome."""
        deferred = self._deferred
        if deferred is not None and faults.ARMED:
            faults.hit("before_checkpoint", f"{deferred.kind.value}:{deferred.name}")
        self._deferred = None
        return deferred

    def flush(self) -> None:
        """Write the deferred result, if any (before a durable call other than a task,
        and when the workflow function ends)."""
        with self._flushing:  # branches of an async run may flush at once
            if self._deferred is not None:
                self._write(self._deferred, None, stamp=False)

    @property
    def deferred(self) -> bool:
        """Whether a task's result waits to be written with the next write."""
        return self._deferred is not None

    def publish(self, read: Callable[[], Mapping[str, Any]] | None = None) -> Properties:
        """The run's published properties (*read*: a class workflow's instance's)."""
        if self.properties is None:
            self.properties = Properties(self.run_id, self.replay.last_state(), read)
        return self.properties

    def step_for(
        self,
        pending: Pending,
        status: StepStatus,
        *,
        output: bytes | None = None,
        error: bytes | None = None,
        wake_at: float | None = None,
    ) -> Step:
        """The history row for *pending* with *status* and its output or error; it ended
        now, unless it is a start (RUNNING)."""
        call = pending.call
        if pending.input is UNSET:
            pending.input = self.host.preview(call.arguments)
        finished = None if status is StepStatus.RUNNING else self.host.clock.now()
        started = pending.started or finished or self.host.clock.now()  # begin's, for a start
        return Step(
            run_id=self.run_id, position=pending.position, kind=pending.kind or call.target.kind,
            name=call.target.name, call_hash=pending.digest, status=status, input=pending.input,
            output=output, error=error, attempts=pending.attempt or 1, started_at=started,
            finished_at=finished, epoch=self.epoch, wake_at=wake_at,
        )  # fmt: skip

    def succeeded(self, pending: Pending, value: Any, *, defer: bool = False) -> Any:
        """Record *value* as the outcome of *pending* and return it.

        *defer*: keep the record for the next write of this run instead (see `begin`):
        the workflow code between two durable calls is deterministic and has no effects,
        so writing the result later loses nothing but the time to re-run that code.
        """
        try:
            output = self.host.dump(value, pending.describe_result)
        except SerializationError as error:
            # Deterministic: record the failure, so replay raises it without re-running.
            self.failed(pending, error)
            raise
        step = self.step_for(pending, StepStatus.COMPLETED, output=output)
        if defer:
            self.defer(step)
            return value
        return self.settle(step, value)

    def defer(self, step: Step) -> None:
        """Keep the finished *step* to write with this run's next write (see `begin`)."""
        self._deferred = step
        self.replay.remember(step)

    def failed(self, pending: Pending, error: BaseException) -> None:
        """Record *error* as the outcome of *pending*."""
        self.record(self.step_for(pending, StepStatus.FAILED, error=self.host.dump_error(error)))

    def settle(self, step: Step, value: Any) -> Any:
        """Record a finished step; if another writer got there first, use its outcome."""
        stored = self.record(step)
        if stored.status is step.status and stored.output == step.output:
            return value
        return self.replayed(stored)

    def record(self, step: Step) -> Step:
        """Write *step* (fenced), after the deferred result if any, in one commit; learn
        of cancellation requests on the way back."""
        deferred = self._deferred
        if deferred is not None and step.status is not StepStatus.RUNNING:
            self._write(deferred, None, stamp=False)  # only a task's start goes with it
            deferred = None
        return self._write(step, deferred)

    def _write(self, step: Step, deferred: Step | None, *, stamp: bool = True) -> Step:
        """Write *step*, with the *deferred* result before it; *stamp*: carrying the
        properties' snapshot if they changed (which may raise SerializationError:
        nothing written). A deferred result written alone is not stamped: the code
        after it ends at the next write, which carries the snapshot."""
        properties = self.properties if stamp else None
        if properties is not None:
            step = properties.stamp(step)
        self._deferred = None
        if faults.ARMED:  # the subject costs more to build than the check
            for each in (deferred, step):  # an outcome's checkpoint, not a task's start
                if each is not None and each.status is not StepStatus.RUNNING:
                    faults.hit("before_checkpoint", f"{each.kind.value}:{each.name}")
        try:
            if deferred is None:
                stored, requests = self.host.backend.record(step, self.epoch)
            else:
                both, requests = self.host.backend.record_steps([deferred, step], self.epoch)
                self.replay.remember(both[0])
                if requests & CANCEL_REQUEST:
                    # Cancelled while the last task ran: it must be delivered where that
                    # task returned, and the workflow code has gone past it. That code is
                    # deterministic: replay it (the run is queued again at once).
                    self.interrupts.requested = True
                    raise self.suspend(self.host.clock.now(), None)
                stored = both[1]
        except (LeaseLost, StorageError) as error:
            raise self.poison(error) from None
        except InvalidValue as error:  # bad input: raised into the workflow, not an outage
            raise InvalidValue(
                f"Run {self.run_id!r} cannot record {step.kind.value} {step.name!r} at position "
                f"{step.position}: {error}"
            ) from None
        if requests:
            self.interrupts.learn(requests)
        if properties is not None:
            properties.stored(step)
        self.replay.remember(stored)
        # A task's start is no progress (a task that kills its process every time
        # starts again and again); the result that came with it is.
        if deferred is not None or (stored is step and step.status is not StepStatus.RUNNING):
            self.progressed()
        return stored

    def progressed(self) -> None:
        """This run got somewhere new (a step recorded, a wait reached) without killing
        its process: after a takeover, it starts counting owner deaths afresh."""
        if self._recovering:
            self._recovering = False
            self.host.backend.mark_progress(self.run_id, self.epoch)
            self.host.leases.unproven.discard(self.run_id)
