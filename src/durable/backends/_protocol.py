"""The storage seam: what durable needs from a database, in domain terms.

Every method is atomic. Payloads arrive and leave as opaque bytes. Times are seconds
since the epoch on the backend's own clock (the database clock on PostgreSQL), which is
the clock leases are judged by. `durable.testing.check_backend` is the executable form
of these contracts; a third-party backend passes it or is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from durable.core.records import Action, Event, NewRun, Outcome, Run, RunQuery, RunStatus, Step

#: The topic notified when a run starts sleeping: workers read `Backend.next_wake` again.
TIMERS = "timers"


class Watch(Protocol):
    """A wait for changes on some topics (see `Backend.watch`)."""

    def wait(self, timeout: float) -> bool:
        """Block until a watched topic may have changed, or *timeout* seconds pass.

        Returns:
            True if a change was signalled since the previous wait (or the watch began).
            False only means "nothing signalled": callers re-read the database anyway.
        """
        ...


class Backend(Protocol):
    """Where runs and their histories live."""

    def now(self) -> float:
        """Return the backend's current time, the clock that judges leases."""
        ...

    def create_run(self, new: NewRun) -> tuple[Run, bool]:
        """Insert a run unless one with its id exists.

        A created run with an owner is RUNNING at epoch 1 and leased to the owner for
        ``new.lease`` seconds; without an owner it is QUEUED at epoch 0, claimable by
        `claim_next` in ``new.queue``, and ``queue:<name>`` is notified.

        Returns:
            The stored run and whether this call created it. When two callers race,
            exactly one gets True.
        """
        ...

    def get_run(self, run_id: str) -> Run | None:
        """Return the run, or None if no run has this id."""
        ...

    def load_history(self, run_id: str) -> Sequence[Step]:
        """Return every recorded step of the run, ordered by position, in one read."""
        ...

    def record(self, step: Step, epoch: int) -> tuple[Step, bool]:
        """Store *step* at its position, fenced by the run's epoch.

        A position holding a finished step is never changed: the stored step is
        returned instead (first writer wins). A RETRYING or WAITING step may be
        replaced; the position keeps the ``started_at`` of its first write.

        Returns:
            The step now stored at the position (*step*, or the finished one found
            there), and whether cancellation of the run has been requested.

        Raises:
            LeaseLost: the run's epoch is no longer *epoch*; nothing was written.
        """
        ...

    def finish_run(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        output: bytes | None = None,
        error: bytes | None = None,
    ) -> bool:
        """Set the run's outcome and drop its lease, fenced by *epoch*.

        *status* is COMPLETED, FAILED, CANCELLED or DEAD (terminal: only
        an operator's `retry_run` changes FAILED or DEAD again)
        or BLOCKED (resumable once the code matches the history again). ``run:<id>``
        is notified, and a parent WAITING on this run (``waiting_on == "run:<id>"``) is
        queued again.

        Returns:
            False if the run's epoch moved on, or it already finished; nothing changed then.
        """
        ...

    def claim_run(
        self, run_id: str, *, owner: str, lease: float, epoch: int, dead_owner: str | None = None
    ) -> Run | None:
        """Take ownership of a run whose owner is gone; a compare-and-set.

        Succeeds only if the run is still at *epoch* and claimable: QUEUED, BLOCKED,
        WAITING with ``wake_at`` passed, or RUNNING with an expired lease or with
        ``lease_owner == dead_owner`` (a caller that has verified that owner is dead).
        The claim bumps the epoch, so every write of the previous owner is fenced off
        from then on. Taking over a RUNNING run
        counts one more recovery; a run first started gets ``started_at``.

        Returns:
            The run as now stored, or None if someone else changed it first.
        """
        ...

    def mark_progress(self, run_id: str, epoch: int) -> None:
        """The run recorded a new step under this owner: its count of consecutive
        recoveries (owner deaths without progress) returns to 0. Fenced by *epoch*."""
        ...

    def claim_next(
        self,
        *,
        owner: str,
        queue: str,
        workflows: Sequence[str],
        limit: int,
        lease: float,
    ) -> Sequence[Run]:
        """Claim up to *limit* QUEUED runs of *queue* whose workflow is in *workflows*.

        Highest priority first, then oldest. Each becomes RUNNING at the next epoch,
        leased to *owner*. Concurrent callers never claim the same run.
        """
        ...

    def queued_workflows(self, queues: Sequence[str]) -> Sequence[str]:
        """The distinct workflow names of QUEUED runs in *queues*."""
        ...

    def recoverable(self, *, host: str) -> Sequence[Run]:
        """Return runs that may need a new owner.

        That is BLOCKED runs, QUEUED runs that were started before (released, or woken
        from a wait), and RUNNING runs whose lease expired or whose owner names *host*
        (the caller checks whether that process still lives). Sleeping runs that are due
        are not listed: `wake_due` queues them first.
        """
        ...

    def renew_leases(self, owner: str, lease: float) -> int:
        """Extend by *lease* seconds every RUNNING run leased to *owner*; return how many."""
        ...

    def release_run(self, run_id: str, epoch: int) -> bool:
        """Give a RUNNING run up without finishing it: it is QUEUED again, claimable at
        once (without counting a recovery), and ``queue:<name>`` is notified."""
        ...

    def cancel_run(self, run_id: str) -> Run | None:
        """Cancel a run and every unfinished run below it (children, grandchildren...).

        QUEUED and BLOCKED runs become CANCELLED at once; RUNNING ones get
        ``cancel_requested`` (their owner delivers it at the next durable call), and so
        do WAITING ones, which are queued again to receive it.
        Finished runs are not touched. ``run:<id>`` is notified for each changed run.

        Returns:
            The run as now stored, or None if no run has this id.
        """
        ...

    def suspend_run(
        self, run_id: str, epoch: int, *, wake_at: float | None, waiting_on: str | None
    ) -> RunStatus | None:
        """Stop executing a run until its wait is over; drop its lease. Fenced by *epoch*.

        Decided atomically with `send_event` and with runs finishing: if the wait is
        over already (*wake_at* has passed, the inbox holds an unconsumed event named by
        ``waiting_on = "event:<name>"``, or the run named by ``"run:<id>"`` has
        finished) the run is QUEUED at once; otherwise it is WAITING with *wake_at* and
        *waiting_on*. A wake-up can therefore never be lost between the two.

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
        notifies the ``timers`` topic, so that they read it again.
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
        """Put an event in a run's inbox, durably; queue the run if it waits for *name*.

        Events of one name are consumed in the order they were sent. With a *key* that
        this run has seen before, the earlier event is returned and nothing is added.

        Raises:
            RunNotFound: no run has this id.
            RunFinished: the run has finished; it will never consume the event.
        """
        ...

    def consume_event(self, step: Step, epoch: int, name: str) -> tuple[Step, bool] | None:
        """Take the run's oldest unconsumed event *name* and record *step* with it.

        One transaction, fenced by *epoch*: the event's payload becomes the step's
        output, its id the step's input (``{"event": id}``), and the event is marked
        consumed by the step's position. Each event is consumed by exactly one wait.

        Returns:
            As `record`, or None when the inbox holds no such event (nothing changed).

        Raises:
            LeaseLost: the run's epoch is no longer *epoch*; nothing changed.
        """
        ...

    def events(self, run_id: str) -> Sequence[Event]:
        """Every event sent to a run, oldest first, consumed or not."""
        ...

    def purge(self, *, finished_before: float, limit: int, dry_run: bool = False) -> int:
        """Delete up to *limit* finished runs, with their history and their events.

        A run is deleted only when nothing can need it again: it, every run above it
        still stored (parent, grandparent...) and every run below it (children,
        grandchildren...) have finished (COMPLETED, FAILED, CANCELLED or DEAD) before
        *finished_before*, on the backend's clock (its actions go with it). So a child
        of a live parent stays (the parent's replay reads it), a parent stays while any
        descendant lives (cancelling it must still reach them), and QUEUED, RUNNING,
        WAITING and BLOCKED runs are never deleted. Oldest runs (by creation) go first.

        One transaction: a run goes with its history and events, or not at all.
        Concurrent callers never both count one run. A deleted run's id is free again:
        creating a run with it starts a new run.

        Args:
            limit: the most runs to delete (at least 1).
            dry_run: count the runs that would go (up to *limit*), delete nothing.

        Returns:
            How many runs were deleted (or, with *dry_run*, would be). Fewer than
            *limit* means no other run could go (or another caller took them).
        """
        ...

    def list_runs(self, query: RunQuery, *, limit: int) -> Sequence[Run]:
        """Return up to *limit* runs matching *query*, newest first (by ``created_at``,
        then id, both descending). ``query.after`` continues a listing after the run
        it names, so pages neither repeat nor skip runs created meanwhile."""
        ...

    def count_runs(self, query: RunQuery) -> int:
        """How many runs match *query* (``query.after`` included)."""
        ...

    def outcomes(
        self, kind: Literal["run", "task"], *, since: float, name: str | None = None
    ) -> Sequence[Outcome]:
        """How finished runs (created since *since*), or finished task calls (started
        since *since*), ended; only those named *name* if given. For statistics.

        A run's outcome is its workflow name, status, start (its creation if it never
        started) and finish; a task call's is a COMPLETED or FAILED history step of
        kind TASK, with its first start and its finish.
        """
        ...

    def retry_run(self, run_id: str, positions: Sequence[int]) -> Run | None:
        """Give a FAILED or DEAD run another go: an operator's override of its outcome.

        One transaction: the FAILED steps at *positions* are deleted (the run will call
        them again), the run becomes QUEUED with no outcome, lease or recoveries, and
        ``queue:<name>`` is notified. Other steps stay, so finished work is replayed,
        not redone. A run in any other status is not changed.

        Returns:
            The run as now stored, or None if no run has this id.
        """
        ...

    def record_action(self, run_id: str, action: str, *, actor: str | None, detail: str) -> Action:
        """Append an operator's action on a run to the actions log, stamped with the
        backend's clock. *detail* is JSON text. Purging a run deletes its actions."""
        ...

    def actions(self, run_id: str) -> Sequence[Action]:
        """The actions recorded on a run, oldest first."""
        ...

    def watch(self, topics: Sequence[str]) -> Watch:
        """Start watching *topics* (``run:<id>``, ``queue:<name>``) for changes.

        Notifications only shorten waits; backends that cannot hear other processes
        bound each wait by a short poll interval.
        """
        ...

    def close(self) -> None:
        """Release connections and threads. The backend is unusable afterwards."""
        ...
