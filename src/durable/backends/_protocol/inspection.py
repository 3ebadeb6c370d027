"""The operator's role of the storage seam: inspecting runs, and keeping the store tidy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from durable.core.records import Action, Outcome, Run, RunQuery


class InspectionStore(Protocol):
    """Listing runs, statistics, an operator's retries and actions, and purging."""

    def list_runs(self, query: RunQuery, *, limit: int) -> Sequence[Run]:
        """Return up to *limit* runs matching *query*, newest first (by ``created_at``,
        then id, both descending). ``query.after`` continues a listing after the run
        it names, so pages neither repeat nor skip runs created meanwhile."""
        ...

    def count_runs(self, query: RunQuery) -> int:
        """How many runs match *query* (``query.after`` included)."""
        ...

    def outcomes(
        self,
        kind: Literal["run", "task"],
        *,
        since: float,
        name: str | None = None,
        workflow: str | None = None,
    ) -> Sequence[Outcome]:
        """Where runs created since *since* stand (finished or not), or how finished
        task calls (started since *since*) ended; only those named *name* if given,
        and for task calls only those of runs of *workflow* if given. For statistics.

        A run's outcome is its workflow name, status, start (its creation if it never
        started) and finish (None while unfinished); a task call's is a COMPLETED or
        FAILED history step of kind TASK, with its first start and its finish.

        Outcomes that `retry_run` erased are included too, marked ``retried`` (filtered
        by when they started): a retried run's failure, and its failed task calls.
        """
        ...

    def actions(self, run_id: str) -> Sequence[Action]:
        """The actions recorded on a run, oldest first."""
        ...

    def state(self, run_id: str) -> tuple[bytes | None] | None:
        """The run's latest properties snapshot (JSON), read without running its code:
        `Run.state` if its end wrote one, else the last step's that has one. ``(None,)``
        if it never published any; None if no run has this id."""
        ...

    def record_action(self, run_id: str, action: str, *, actor: str | None, detail: str) -> Action:
        """Append an operator's action on a run to the actions log, stamped with the
        backend's clock. *detail* is JSON text. Each action gets a larger id than the
        ones recorded before it. Purging a run deletes its actions."""
        ...

    def retry_run(self, run_id: str, positions: Sequence[int]) -> Run | None:
        """Give a FAILED or DEAD run another go: an operator's override of its outcome.

        One transaction: the run's outcome and its FAILED task steps at *positions* are
        kept for `outcomes` (marked ``retried``), the FAILED steps at *positions* are
        deleted (the run will call them again), the run becomes QUEUED with no outcome,
        lease or recoveries, and
        ``queue:<name>`` is notified. Other steps stay, so finished work is replayed,
        not redone. A run in any other status is not changed, so of concurrent retries
        of one run only the first reopens and queues it.

        Returns:
            The run as now stored, or None if no run has this id.
        """
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
