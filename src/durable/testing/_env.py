"""DurableEnv: a whole durable world inside a unit test, with time under the test's control.

It is the memory backend, a `VirtualClock` and an inline worker that executes queued
runs in the test's own thread. Nothing sleeps: every wait and retry delay suspends
its run, and time moves only when the test says so (`advance`, `run_until_idle`), or
when it waits for a result (``handle.result()``), which runs the world, jumping from
timer to timer, until that run has finished. A 30-day workflow therefore completes
in milliseconds, and its timers fire in order, each at its exact virtual moment.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any, TypeVar

from durable.api.handles import Handle, dispatch_parts
from durable.api.waiting import send
from durable.backends.memory import MemoryBackend
from durable.core.functions import Call, Durable
from durable.core.records import Run, RunStatus, Step, StepKind
from durable.errors import DurableError
from durable.runtime import defaults as _config
from durable.runtime import registry as _registry
from durable.runtime import schedules
from durable.runtime.engine import Engine

R = TypeVar("R")

#: Where virtual time starts unless told: a fixed moment, so tests are repeatable.
EPOCH = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


class VirtualClock:
    """A clock that moves only when told (`advance`, `set`), or when slept on.

    Sleeping on it moves it at once: in a test driven from one thread, nothing else
    could move it while the sleeper waits.
    """

    def __init__(self, start: dt.datetime | float = EPOCH) -> None:
        self._time = start.timestamp() if isinstance(start, dt.datetime) else float(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        """The virtual time, in seconds since the epoch."""
        return self._time

    def sleep(self, seconds: float) -> None:
        """Move the clock forward by *seconds* (never backward)."""
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        """Move the clock forward by *seconds*."""
        if seconds > 0:
            with self._lock:
                self._time += seconds

    def set(self, when: float) -> None:
        """Move the clock to *when*, if that is later than now."""
        with self._lock:
            self._time = max(self._time, when)


class History(list[Step]):
    """A run's recorded steps, in position order."""

    def kinds(self) -> list[StepKind]:
        """The kind of each step (they compare equal to strings: ``"task"``, ``"sleep"``)."""
        return [step.kind for step in self]

    def names(self) -> list[str]:
        """The name of each step: the task or workflow, the event, ``durable.sleep``..."""
        return [step.name for step in self]


class DurableEnv:
    """A memory backend, a virtual clock and an inline worker, for unit tests.

    Use it as a context manager: inside, it is the default engine, so `durable.execute`,
    `durable.dispatch` and `durable.send` in the code under test use it too.

    Args:
        start: the virtual time at the start (default: 2025-01-01 00:00 UTC).
        allow_pickle: as for `Engine`.
        max_jumps: how many timers `run_until_idle` and ``result()`` may jump to
            before giving up (a workflow that sleeps in a loop forever never idles).
    """

    def __init__(
        self,
        *,
        start: dt.datetime | float = EPOCH,
        allow_pickle: bool | None = None,
        max_jumps: int = 100_000,
    ) -> None:
        self.clock = VirtualClock(start)
        self.backend = MemoryBackend(clock=self.clock)
        self.engine = Engine(
            backend=self.backend, clock=self.clock, allow_pickle=allow_pickle, max_inline_wait=0
        )
        self.engine.pump = self._until_finished
        self.max_jumps = max_jumps
        self._previous: list[Engine | None] = []

    # -- life cycle ------------------------------------------------------------------

    def __enter__(self) -> DurableEnv:
        self._previous.append(_config.swap(self.engine))
        return self

    def __exit__(self, *exc: object) -> None:
        _config.swap(self._previous.pop())
        self.engine.close()

    # -- time ------------------------------------------------------------------------

    def now(self) -> dt.datetime:
        """The virtual time, as an aware UTC datetime."""
        return dt.datetime.fromtimestamp(self.clock.now(), tz=dt.UTC)

    def advance(self, by: dt.timedelta | float) -> None:
        """Move virtual time forward by *by*, firing every timer due on the way, in
        order and each at its own moment, and running what they wake."""
        seconds = by.total_seconds() if isinstance(by, dt.timedelta) else float(by)
        if seconds < 0:
            raise ValueError(f"advance() moves time forward only, got {by}.")
        target = self.clock.now() + seconds
        self.drain()
        while True:
            due_in = _earliest(self.backend.next_wake(), self.backend.next_schedule())
            if due_in is None or self.clock.now() + due_in > target:
                break
            self._jump(due_in)
        self.clock.set(target)
        self._fire()

    def declare_schedules(self, *workflows: Durable[..., Any]) -> None:
        """Store the schedules declared with these workflows (``@workflow(schedule=
        ...)``; all the declared ones if none is named), as a starting worker does;
        `advance` then fires their ticks on the virtual clock. (`durable.schedule`
        stores its schedule at once.)"""
        names = [w.name for w in workflows] or sorted(schedules.DECLARED)
        found = [target for name in names if (target := _registry.find(name)) is not None]
        schedules.declare(self.engine, found)

    def run_until_idle(self) -> None:
        """Run everything that can run, jumping to each next timer, until nothing is
        queued and nothing sleeps (runs may still wait for events)."""
        self.drain()
        for _ in range(self.max_jumps):
            due_in = self.backend.next_wake()
            if due_in is None:
                return
            self._jump(due_in)
        raise DurableError(
            f"run_until_idle() jumped to {self.max_jumps} timers without the world going "
            "idle: some workflow sleeps in an endless loop. Use advance() to move a bounded "
            "amount of time."
        )

    def _jump(self, due_in: float) -> None:
        self.clock.advance(max(0.0, due_in))
        self._fire()

    def _fire(self) -> None:
        """Wake the runs due now, fire the schedules due now, and run what they start."""
        self.backend.wake_due(limit=1_000_000)
        while schedules.fire_due(self.engine) == schedules.BATCH:
            pass
        self.drain()

    # -- work ------------------------------------------------------------------------

    def drain(self) -> None:
        """Execute queued runs in this thread, at the current virtual time, until none
        is left (each runs until it finishes or waits)."""
        while True:
            ran = False
            for queue in self.backend.queues():
                for run in self.backend.claim_next(
                    owner=self.engine.owner,
                    queue=queue,
                    workflows=_registry.names(),
                    limit=1,
                    lease=self.engine.lease,
                    version=self.engine.version,
                    only_version=self.engine.only_version,
                ):
                    target = self.engine.known(run)
                    if target is not None:
                        self.engine.resume_quietly(run, target)
                    ran = True
            if not ran:
                return

    def dispatch(self, target: Any, /, *args: Any, **kwargs: Any) -> Handle[Any]:
        """Start a run (as `durable.dispatch`, with the same run options and the same
        rule for them) and run it until it finishes or waits."""
        call, id, options = dispatch_parts(target, args, kwargs)
        run = self.engine.dispatch_call(call, run_id=id, **options)
        self.drain()
        return Handle(self.engine, run.id)

    def execute(self, target: Durable[..., R] | Call[R], /, *args: Any, **kwargs: Any) -> R:
        """Run a workflow or task to its outcome, jumping over its timers (takes the
        options of `dispatch`)."""
        call, id, options = dispatch_parts(target, args, kwargs, "execute")
        handle = self.dispatch(call, id=id, **options)
        result: R = handle.result()
        return result

    def send(
        self,
        run: str | Handle[Any],
        event: str,
        payload: Any = None,
        *,
        key: str | None = None,
        sender: str | None = None,
    ) -> None:
        """`durable.send`, then run what the event wakes."""
        send(run, event, payload, key=key, sender=sender)
        self.drain()

    # -- looking -----------------------------------------------------------------------

    def run(self, run_id: str) -> Run:
        """The stored run."""
        return self.engine.reread(run_id)

    def history(self, run_id: str) -> History:
        """The run's recorded steps."""
        return History(self.backend.load_history(run_id))

    def _until_finished(self, run_id: str) -> None:
        """Run the world until run *run_id* has finished (the engine's pump)."""
        self.drain()
        for _ in range(self.max_jumps):
            run = self.engine.follow(self.engine.reread(run_id))  # a chain: its last run
            if run.status.finished:
                return
            if run.status is RunStatus.BLOCKED:
                raise self.engine.load_error(run.error or b"", run.id, None)
            due_in = self.backend.next_wake()
            if due_in is None:
                raise DurableError(self._stuck(run))
            self._jump(due_in)
        raise DurableError(
            f"Run {run_id!r} has not finished after {self.max_jumps} timers: it probably "
            "sleeps in an endless loop."
        )

    def _stuck(self, run: Run) -> str:
        what = {
            RunStatus.WAITING: f"waits for {run.waiting_on or 'a timer'}",
            RunStatus.QUEUED: f"is queued, but {run.workflow!r} is not registered here",
            RunStatus.PAUSED: "is paused (resume it: handle.resume())",
        }.get(run.status, f"is {run.status}")
        return (
            f"Run {run.id!r} ({run.workflow}) {what}, and nothing else can happen in this "
            "DurableEnv: no run is queued and no timer is set. Send the event it waits "
            "for (env.send), or finish what it waits on."
        )


def _earliest(*delays: float | None) -> float | None:
    """The smallest of the delays that are set, or None."""
    known = [delay for delay in delays if delay is not None]
    return min(known) if known else None
