"""The waiting role of the storage seam: sleeping runs, events, and watching for changes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from durable.core.events import Event
from durable.core.records import RunStatus, Step

#: The topic notified when a run starts sleeping: workers read `WaitStore.next_wake` again.
TIMERS = "timers"


class Watch(Protocol):
    """A wait for changes on some topics (see `WaitStore.watch`)."""

    def wait(self, timeout: float) -> bool:
        """Block until a watched topic may have changed, or *timeout* seconds pass.

        Returns:
            True if a change was signalled since the previous wait (or the watch began).
            False only means "nothing signalled": callers re-read the database anyway.
        """
        ...

    async def wait_async(self, timeout: float) -> bool:
        """`wait`, awaited on the running asyncio loop without blocking a thread: a
        change signalled from any thread wakes it through the loop."""
        ...

    def poke(self) -> None:
        """End the current (or the next) `wait` now, as if a topic had changed: for the
        watch's owner, from another thread, with news the database does not signal."""
        ...


class WaitStore(Protocol):
    """Runs waiting for a time, an event or another run, and the events they receive.

    The rule of this role: a wake-up is never lost. Whatever ends a wait (its time
    passing, an event sent, the awaited run finishing) is decided atomically with the
    run's decision to wait, so a run never sleeps on something that already happened.
    """

    def suspend_run(
        self, run_id: str, epoch: int, *, wake_at: float | None, waiting_on: str | None
    ) -> RunStatus | None:
        """Stop executing a run until its wait is over; drop its lease. Fenced by *epoch*.

        Decided atomically with `send_event` and with runs finishing: if the wait is
        over already (*wake_at* has passed, the inbox holds an unconsumed event named by
        ``waiting_on = "event:<name>"``, or the run named by ``"run:<id>"`` has
        finished) the run is QUEUED at once; otherwise it is WAITING with *wake_at* and
        *waiting_on*. A wake-up can therefore never be lost between the two. With
        *waiting_on* prefixed by `ANY_EVENT` (``events|...``, a workflow class with
        ``on_event``), any unconsumed event ends the wait too.

        Returns:
            The status set, or None if the run's epoch moved on (nothing changed).
        """
        ...

    def wake_due(self, *, limit: int) -> int:
        """Queue up to *limit* WAITING runs whose ``wake_at`` has passed, most overdue
        first; notify their queues. Concurrent callers never wake one run twice.

        Returns:
            How many runs were woken.
        """
        ...

    def next_wake(self) -> float | None:
        """Seconds from now (on the backend's clock) until the earliest ``wake_at`` of a
        WAITING run, negative if it is overdue; None if no run sleeps on a timer.

        Workers sleep that long before calling `wake_due`. A run that starts sleeping
        notifies the `TIMERS` topic, so that they read it again.
        """
        ...

    def send_event(
        self,
        run_id: str,
        name: str,
        payload: bytes,
        *,
        key: str | None = None,
        sender: str | None = None,
    ) -> Event:
        """Put an event in a run's inbox, durably; queue the run if it waits for *name*
        (or for any event: ``waiting_on`` prefixed by `ANY_EVENT`).

        One transaction: the event is stored and the run woken together. Events of one
        name are consumed in the order they were sent. With a *key* that this run has
        seen before, the earlier event is returned and nothing is added; concurrent
        sends with one key store one event, and every caller gets it.

        To a CONTINUED run (see `RunStore.continue_run`) the event goes to the current
        run of its chain: successors are followed, each locked in turn, in the same
        transaction (a key seen by a run on the way counts as seen). The returned
        event's ``run_id`` names the run that got it.

        Raises:
            RunNotFound: no run has this id (nor, following a chain, its successor).
            RunFinished: the run has finished; it will never consume the event.
        """
        ...

    def consume_event(
        self, step: Step, epoch: int, name: str | None, *, exclude: str | None = None
    ) -> tuple[Step, int] | None:
        """Take the run's oldest unconsumed event *name* and record *step* with it.

        With *name* None, the oldest unconsumed event of any name but *exclude* (for a
        workflow class's ``on_event``), whose name the recorded step takes.

        One transaction, fenced by *epoch*: the event's payload becomes the step's
        output, its id the step's input (``{"event": id}``), and the event is marked
        consumed by the step's position. Each event is consumed by exactly one wait.

        Returns:
            As `HistoryStore.record`, or None when the inbox holds no such event
            (nothing changed).

        Raises:
            LeaseLost: the run's epoch is no longer *epoch*; nothing changed.
        """
        ...

    def has_events(self, run_id: str, *, exclude: str | None = None) -> bool:
        """Whether the run's inbox holds an unconsumed event not named *exclude*."""
        ...

    def events(self, run_id: str) -> Sequence[Event]:
        """Every event sent to a run, oldest first, consumed or not."""
        ...

    def watch(self, topics: Sequence[str]) -> Watch:
        """Start watching *topics* (``run:<id>``, ``queue:<name>``) for changes.

        Notifications only shorten waits; backends that cannot hear other processes
        bound each wait by a short poll interval.
        """
        ...
