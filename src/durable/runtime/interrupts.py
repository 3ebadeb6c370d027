"""What stops a run from outside its own code: a cancel request, or its deadline (and
a pause request, which halts it without its code knowing: see `RunContext.allocate`).

Either is delivered once, as `Cancelled` (with ``timed_out`` set for the deadline): by
the durable call that was in flight, as it returns, or else at the next durable call
that has no outcome yet. `RunContext` decides where; this module holds the state and
the markers. A delivery point is recorded as a marker step (kind ``cancel``), so that
replay raises the same thing at the same place, whatever the clock says by then; the
calls made after it (in ``finally``, in ``except Cancelled``) run normally.

A cancel request outranks the deadline. Until the deadline is delivered, no wait may
outlast it: `cap` brings a suspended run's wake time forward to it, so a run asleep
past its deadline is woken, replayed to its wait, and stopped there.
"""

from __future__ import annotations

from durable.core.clock import Clock
from durable.core.hashing import call_hash
from durable.core.records import (
    CANCEL_REQUEST,
    PAUSE_REQUEST,
    Run,
    Step,
    StepKind,
    StepStatus,
)
from durable.errors import Cancelled

#: the marker of a cancellation raised by a call that had no outcome yet (in its place).
CANCEL = "durable.cancel"
#: ... and of one raised by a finished call as it returned (the position after it).
CANCEL_RETURN = "durable.cancel.on-return"
#: the same two for a run's deadline.
TIMEOUT = "durable.timeout"
TIMEOUT_RETURN = "durable.timeout.on-return"

_HASHES = {
    name: call_hash(StepKind.CANCEL, name, {})
    for name in (CANCEL, CANCEL_RETURN, TIMEOUT, TIMEOUT_RETURN)
}
#: the markers of an interruption delivered as a finished call returned.
ON_RETURN = frozenset({CANCEL_RETURN, TIMEOUT_RETURN})


class Interrupts:
    """One executing run's cancel request and deadline, and what was delivered."""

    __slots__ = ("_clock", "deadline", "delivered", "pause", "requested", "run_id", "timed_out")

    def __init__(self, run: Run, clock: Clock) -> None:
        self.run_id, self._clock = run.id, clock
        #: a cancel request reached this execution (from the run, a write, a heartbeat).
        self.requested = run.cancel_requested
        #: a pause request reached this execution: it parks at its next durable call.
        self.pause = run.pause_requested
        #: when the run must have ended (engine clock), or None.
        self.deadline = run.deadline_at
        #: a `Cancelled` reached the workflow code: nothing more is delivered.
        self.delivered = False
        #: ... and it was the deadline's: the run ends TIMED_OUT, whatever its code does.
        self.timed_out = False

    def learn(self, requests: int) -> None:
        """Take in the requests a write brought back (`CANCEL_REQUEST`, `PAUSE_REQUEST`)."""
        if requests & CANCEL_REQUEST:
            self.requested = True
        if requests & PAUSE_REQUEST:
            self.pause = True

    def due(self) -> bool:
        """Whether an interruption waits to be delivered."""
        if self.delivered:
            return False
        if self.requested:
            return True
        deadline = self.deadline
        return deadline is not None and self._clock.now() >= deadline

    def deliver(self, position: int, epoch: int, *, on_return: bool) -> tuple[Step, Cancelled]:
        """Deliver the due interruption at *position*: its marker, and what to raise."""
        timed_out = not self.requested
        if timed_out:
            name = TIMEOUT_RETURN if on_return else TIMEOUT
        else:
            name = CANCEL_RETURN if on_return else CANCEL
        now = self._clock.now()
        marker = Step(
            run_id=self.run_id, position=position, kind=StepKind.CANCEL, name=name,
            call_hash=_HASHES[name], status=StepStatus.COMPLETED, output=b"jnull",
            started_at=now, finished_at=now, epoch=epoch,
        )  # fmt: skip
        return marker, self.raised(timed_out=timed_out)

    def replayed(self, marker: Step) -> Cancelled:
        """The interruption a recorded marker delivered, delivered again."""
        return self.raised(timed_out=marker.name in (TIMEOUT, TIMEOUT_RETURN))

    def raised(self, *, timed_out: bool) -> Cancelled:
        """Note an interruption as delivered; return it."""
        self.delivered = True
        self.timed_out = self.timed_out or timed_out
        return Cancelled(self.run_id, timed_out=timed_out)

    def caught(self, error: Cancelled) -> None:
        """A recorded `Cancelled` was raised into the workflow (a task stopped by it, a
        cancelled child waited for): that was the delivery."""
        self.delivered = True
        self.timed_out = self.timed_out or error.timed_out

    def cap(self, wake_at: float | None) -> float | None:
        """*wake_at* (None: no end of its own), brought forward to the deadline while
        it is not delivered."""
        if wake_at is not None:
            return self.until(wake_at)
        return None if self.delivered else self.deadline

    def until(self, moment: float) -> float:
        """*moment*, brought forward to the deadline while it is not delivered."""
        deadline = self.deadline
        if deadline is None or self.delivered or moment <= deadline:
            return moment
        return deadline
