"""The runs role of the storage seam: creating runs, leasing them, finishing them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from durable.core.records import NewRun, Run, RunStatus, Step


class RunStore(Protocol):
    """Runs and their leases.

    A run is owned through a lease, and every change an owner makes is fenced by the
    run's *epoch*: it applies only while the run is still at that epoch, which each
    claim bumps. State changes are compare-and-sets, so of concurrent callers racing
    for one change at one epoch at most one succeeds; the others change nothing and
    learn it from the result.
    """

    def now(self) -> float:
        """Return the backend's current time, the clock that judges leases."""
        ...

    def create_run(self, new: NewRun) -> tuple[Run, bool]:
        """Insert a run unless one with its id exists.

        A created run with an owner is RUNNING at epoch 1 and leased to the owner for
        ``new.lease`` seconds; without an owner it is QUEUED at epoch 0, claimable by
        `claim_next` in ``new.queue``, and ``queue:<name>`` is notified; or, with a
        ``new.start_at``, WAITING with that ``wake_at`` (no ``waiting_on``), and
        `TIMERS` is notified: `WaitStore.wake_due` queues it then. ``new.attributes``
        are written in the same transaction, only if the run is created. The run keeps
        ``new.trace_context`` as it is (as `continue_run`, `fork_run`, `debounce_run`).

        Returns:
            The stored run and whether this call created it. When two callers race,
            exactly one gets True; the others get the stored run, which their call
            did not change.
        """
        ...

    def create_run_in(
        self,
        new: NewRun,
        transaction: object,
        *,
        committed: Callable[[Run], None] | None = None,
    ) -> tuple[Run, bool]:
        """`create_run` for a run without an owner, inside the caller's open database
        transaction (the outbox pattern): the run exists if and only if the caller
        commits it, and it is announced (PostgreSQL's NOTIFY) at that commit. If this
        call inserted it, *committed* is called with it as that transaction commits
        (never if it, or a savepoint the insert was made in, is rolled back).

        *transaction* is a SQLAlchemy ``Connection`` or ORM ``Session`` with a
        transaction open, on this backend's database: for SQLite the same file, for
        PostgreSQL the same server and database (durable's schema is used whatever the
        connection's ``search_path``). No key limit, no ``start_at``.

        Raises:
            ConfigurationError: the backend has no transactions to share (memory), or
                *transaction* is on another database; nothing was written.
            TypeError: *transaction* is neither a Connection nor a Session.
            ValueError: its transaction is closed, or none was begun; nothing was
                written.
        """
        ...

    def create_runs(self, news: Sequence[NewRun]) -> Sequence[str]:
        """`create_run` for many runs at once (no owner, no key limit; schedules fire
        their ticks so; no attributes): each is created, QUEUED or WAITING until its ``start_at``,
        unless a run has its id. Returns the ids this call created; ``queue:<name>``
        is notified for their queues, `TIMERS` for the waiting ones."""
        ...

    def get_run(self, run_id: str) -> Run | None:
        """Return the run, or None if no run has this id."""
        ...

    def claim_run(
        self,
        run_id: str,
        *,
        owner: str,
        lease: float,
        epoch: int,
        dead_owner: str | None = None,
        version: str | None = None,
        only_version: bool = False,
    ) -> Run | None:
        """Take ownership of a run whose owner is gone; a compare-and-set.

        Succeeds only if the run is still at *epoch* and claimable: QUEUED, BLOCKED,
        WAITING with ``wake_at`` passed, or RUNNING with an expired lease, with
        ``lease_owner == dead_owner`` (a caller that has verified that owner is dead),
        or with a hung task attempt: a RUNNING step whose ``wake_at`` (its heartbeat
        deadline, see `HistoryStore.heartbeat`) has passed, though its owner lives.
        The claim bumps the epoch, so every write of the previous owner is fenced off
        from then on, and of concurrent claims at one epoch at most one succeeds.
        Taking over a RUNNING run counts one more recovery; a run first started gets
        ``started_at``. The limits of the run's queue hold as for `claim_next`
        (`durable.core.queues.admits`): a run they do not admit is not claimed.
        *version* and *only_version* stamp and filter as for `claim_next`.

        Returns:
            The run as now stored, or None if someone else changed it first.
        """
        ...

    def claim_next(
        self,
        *,
        owner: str,
        queue: str,
        workflows: Sequence[str],
        limit: int,
        lease: float,
        version: str | None = None,
        only_version: bool = False,
    ) -> Sequence[Run]:
        """Claim up to *limit* QUEUED runs of *queue* whose workflow is in *workflows*.

        Highest priority first, then oldest. Each becomes RUNNING at the next epoch,
        leased to *owner*. Concurrent callers never claim the same run.

        *version* is the claimer's code version: a run this claim starts for the first
        time (``started_at`` was None) takes it as its ``version`` (None keeps the
        run's). With *only_version* (which needs a *version*), only runs whose
        ``version`` is *version* or None are claimed
        (`durable.core.run_options.serves`); the others stay QUEUED for claimers of
        their version, and the runs behind them may be claimed.

        The limits *queue* declares (`QueueStore.put_queue`) hold across concurrent
        callers: at most ``concurrency`` of its runs RUNNING on an unexpired lease; at
        most a key's limit (the run's ``key_limit``, else the queue's
        ``key_concurrency``) of the runs sharing its ``key``; no more first starts than
        its rate allows (`durable.core.queues.choose` is the rule). A run that no
        limit admits stays QUEUED, and the runs behind it may be claimed.
        """
        ...

    def mark_progress(self, run_id: str, epoch: int) -> None:
        """The run recorded a new step under this owner: its count of consecutive
        recoveries (owner deaths without progress) returns to 0. Fenced by *epoch*."""
        ...

    def renew_leases(self, owner: str, lease: float) -> int:
        """Extend by *lease* seconds every RUNNING run leased to *owner*; return how many."""
        ...

    def release_run(self, run_id: str, epoch: int) -> bool:
        """Give a RUNNING run up without finishing it: it is QUEUED again, claimable at
        once (without counting a recovery), and ``queue:<name>`` is notified.

        Returns:
            False, changing nothing, if the run's epoch moved on or it is not RUNNING.
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
        last_step: Step | None = None,
        state: bytes | None = None,
    ) -> bool:
        """Set the run's outcome and drop its lease, fenced by *epoch*.

        *last_step*: the step whose result the outcome follows from (the last task's,
        not written yet), recorded in the same commit as `HistoryStore.record` would
        record it: no commit of its own for it (see docs/architecture.md).

        *state*: the properties snapshot the run's last stretch of code made (`Run.state`,
        in the same commit); None keeps the stored one.

        *status* is COMPLETED, FAILED, CANCELLED, TIMED_OUT or DEAD (terminal: only
        an operator's `retry_run` changes FAILED or DEAD again)
        or BLOCKED (resumable once the code matches the history again). ``run:<id>``
        is notified, and a parent WAITING on this run (``waiting_on == "run:<id>"``) is
        queued again, atomically with the outcome: a parent suspending on this run at
        the same moment is either queued by this call or sees the run finished (see
        `WaitStore.suspend_run`).

        Returns:
            False if the run's epoch moved on, or it already finished; nothing changed
            then. Of concurrent finishes at one epoch the first wins, and the others
            return False.
        """
        ...

    def continue_run(
        self,
        run_id: str,
        epoch: int,
        successor: NewRun,
        *,
        last_step: Step | None = None,
        state: bytes | None = None,
    ) -> bool:
        """Hand a RUNNING top-level run over to its successor (``continue_as_new``), in
        one transaction, fenced by *epoch*, the run being unfinished and having no parent:

        * *last_step* and *state* are recorded as by `finish_run`;
        * the run becomes CONTINUED (finished: ``finished_at`` set, lease dropped);
        * *successor* (no owner; its id `durable.core.chains.successor_id` of *run_id*)
          is created QUEUED, as by `create_run`, with the run's cancel and pause
          requests carried over, and its attributes copied (``successor.attributes``
          are not used);
        * the run's unconsumed events move to the successor's inbox, in their order
          (an event sent to the run before this commits is the successor's; a
          `send_event` after it follows the chain);
        * the run's unfinished children become the successor's children, so that
          cancelling (and purging) the chain still reaches them.

        ``run:<id>`` and the successor's ``queue:<name>`` are notified.

        Returns:
            True if this call continued the run (or, after a lost acknowledgement, its
            own earlier attempt did); False, changing nothing, if the epoch moved on,
            the run finished, or it has a parent.

        Raises:
            IdempotencyConflict: a run with the successor's id exists already (made
                with a reserved id before they were reserved); nothing changed.
        """
        ...

    def recoverable(self, *, host: str) -> Sequence[Run]:
        """Return runs that may need a new owner.

        That is BLOCKED runs, QUEUED runs that were started before (released, or woken
        from a wait), and RUNNING runs whose lease expired or whose owner string starts
        with ``host + ":"`` (the caller passes its place, ``host@boot-id.pid-namespace``,
        and checks whether that process still lives), or that have a hung task attempt
        (as for `claim_run`). Sleeping runs that are due are not listed: `wake_due`
        queues them first.
        """
        ...

    def queued_workflows(self, queues: Sequence[str]) -> Sequence[str]:
        """The distinct workflow names of QUEUED runs in *queues*."""
        ...
