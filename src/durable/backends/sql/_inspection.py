"""The SQL backend's operator side: listing runs, statistics, retries, the actions log,
and purging old finished runs.

A mixin of `SQLBackend`; the statements are in `_statements/inspection.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from durable.backends import _rows
from durable.backends._purging import Relative, may_go
from durable.backends._statements.base import Statement
from durable.backends._statements.inspection import query_values
from durable.core.records import Action, Outcome, Run, RunQuery, RunStatus

from ._base import SQLBase

#: How many old finished runs `purge` reads at a time while looking for runs to delete.
PURGE_WINDOW = 1000
_FINISHED = frozenset(status.value for status in RunStatus if status.finished)


class SQLInspection(SQLBase):
    """`InspectionStore` for `SQLBackend` (see there for the contracts)."""

    #: (cutoff, the last run looked at) of the last purge: see `purge`.
    _purged_to: tuple[float, tuple[float, str]] | None
    _choose_driver: Callable[..., None]

    def list_runs(self, query: RunQuery, *, limit: int) -> Sequence[Run]:
        """See `InspectionStore.list_runs`."""
        values = self._query_values(query)
        self._choose_driver(values, count=False)
        statement = self._sql.inspect.listing(values, count=False)
        values["limit"] = max(1, limit)
        return self._db.run(
            "Listing runs",
            lambda conn, _: [
                _rows.run(row) for row in self._execute(conn, statement, values).fetchall()
            ],
        )

    def count_runs(self, query: RunQuery) -> int:
        """See `InspectionStore.count_runs`."""
        values = self._query_values(query)
        self._choose_driver(values, count=True)
        statement = self._sql.inspect.listing(values, count=True)
        return int(
            self._db.run(
                "Counting runs",
                lambda conn, _: self._execute(conn, statement, values).fetchone()[0],
            )
        )

    def _query_values(self, query: RunQuery) -> dict[str, Any]:
        values = query_values(query)
        if "statuses" in values:
            values["statuses"] = self._names(values["statuses"])
        return values

    def outcomes(
        self,
        kind: Literal["run", "task"],
        *,
        since: float,
        name: str | None = None,
        workflow: str | None = None,
    ) -> Sequence[Outcome]:
        """See `InspectionStore.outcomes`."""
        values: dict[str, Any] = {"since": since}
        if kind == "run":
            statement = self._sql.run_outcomes
        elif workflow is not None:
            statement, values["workflow"] = self._sql.workflow_task_outcomes, workflow
        elif name is None:
            statement = self._sql.task_outcomes
        else:
            statement, values["name"] = self._sql.named_task_outcomes, name
        kept_values = {"kind": kind, "since": since}

        def read(conn: Any, _retried: bool) -> tuple[list[Any], list[Any]]:
            rows = self._execute(conn, statement, values).fetchall()
            return rows, self._execute(conn, self._sql.kept_attempts, kept_values).fetchall()

        rows, kept = self._db.run("Reading outcomes", read)
        found = [Outcome(name=r[0], status=r[1], started_at=r[2], finished_at=r[3]) for r in rows]
        if name is not None and (kind == "run" or workflow is not None):
            found = [outcome for outcome in found if outcome.name == name]
        found += [
            Outcome(name=r[0], status=r[1], started_at=r[2], finished_at=r[3], retried=True)
            for r in kept
            if (name is None or r[0] == name) and (workflow is None or r[4] == workflow)
        ]
        return found

    def retry_run(self, run_id: str, positions: Sequence[int]) -> Run | None:
        """See `InspectionStore.retry_run`."""

        def body(conn: Any, _retried: bool) -> tuple[Run | None, list[Any]]:
            with self._db.transaction(conn):
                status = self._execute(conn, self._sql.lock_for_retry, {"id": run_id}).fetchone()
                topics: list[Any] = []
                if status is not None and RunStatus(status[0]) in (
                    RunStatus.FAILED,
                    RunStatus.DEAD,
                ):
                    # What the retry erases stays countable: statistics read it back.
                    self._execute(conn, self._sql.keep_run_attempt, {"id": run_id})
                    if positions:
                        reopen = {"id": run_id, "positions": self._names(list(positions))}
                        self._execute(conn, self._sql.keep_step_attempts, reopen)
                        self._execute(conn, self._sql.reopen_steps, reopen)
                    topics = self._execute(conn, self._sql.requeue, {"id": run_id}).fetchall()
                row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            return (None if row is None else _rows.run(row)), topics

        run, topics = self._db.run(f"Retrying run {run_id!r}", body)
        self._announce(topics)
        return run

    def record_action(self, run_id: str, action: str, *, actor: str | None, detail: str) -> Action:
        """See `InspectionStore.record_action`."""
        values = {"id": run_id, "action": action, "actor": actor, "detail": detail}

        def body(conn: Any, _retried: bool) -> Action:
            with self._db.transaction(conn):
                row = self._execute(conn, self._sql.add_action, values).fetchone()
            return _action(row)

        return self._db.run(f"Recording {action} of run {run_id!r}", body)

    def actions(self, run_id: str) -> Sequence[Action]:
        """See `InspectionStore.actions`."""
        statement = self._sql.actions
        return self._db.run(
            f"Reading the actions on run {run_id!r}",
            lambda conn, _: [
                _action(row) for row in self._execute(conn, statement, {"id": run_id}).fetchall()
            ],
        )

    def state(self, run_id: str) -> tuple[bytes | None] | None:
        """See `InspectionStore.state`."""
        row = self._db.run(
            f"Reading the state of run {run_id!r}",
            lambda conn, _: self._execute(conn, self._sql.state, {"id": run_id}).fetchone(),
        )
        return None if row is None else (row[0],)

    def purge(self, *, finished_before: float, limit: int, dry_run: bool = False) -> int:
        """See `InspectionStore.purge`. Finding the runs and deleting them is one
        transaction (``BEGIN IMMEDIATE`` on SQLite); a dry run only reads.

        A batch with the same *finished_before* as the previous one goes on from where
        that one stopped: every older run was deleted, or must stay for this cutoff
        (a relative of it is unfinished, or finished after the cutoff, and always will
        be). So purging a long backlog reads each old run once, not once per batch.
        """
        if limit < 1:
            raise ValueError(f"purge() deletes at least one run per batch; limit was {limit}.")
        resume = self._purged_to
        start = resume[1] if resume is not None and resume[0] == finished_before else None

        def body(session: Any, _retried: bool) -> tuple[int, tuple[float, str]]:
            # A retry after a lost connection starts over: what the lost attempt
            # deleted, if it committed, is not counted.
            if dry_run:  # counted, not collected: a dry run may cover millions
                _, counted, end = self._purgeable(session, finished_before, limit, None)
                return counted, end
            with self._db.transaction(session):
                going, _, end = self._purgeable(session, finished_before, limit, start, keep=True)
                if not going:
                    return 0, end
                ids = {"ids": self._names(going)}
                deleted = self._execute(session, self._sql.purge_runs, ids).fetchall()
                gone = [row[0] for row in deleted]
                ids = {"ids": self._names(gone)}
                self._execute(session, self._sql.purge_history, ids)
                self._execute(session, self._sql.purge_events, ids)
                self._execute(session, self._sql.purge_actions, ids)
                self._execute(session, self._sql.purge_attempts, ids)
                self._execute(session, self._sql.purge_attributes, ids)
                self._execute(session, self._sql.purge_streams, ids)
            return len(gone), end

        count, end = self._db.run("Purging finished runs", body)
        if not dry_run:
            self._purged_to = (finished_before, end)
        return count

    def _purgeable(
        self,
        session: Any,
        finished_before: float,
        limit: int,
        start: tuple[float, str] | None,
        *,
        keep: bool = False,
    ) -> tuple[list[str], int, tuple[float, str]]:
        """Runs that may be purged, oldest first, from after *start* (created_at, id),
        up to *limit*: their ids (if *keep*), their count, and the last run looked at."""
        window = min(limit, PURGE_WINDOW)
        after = start or (-1.0, "")

        def done(status: str, finished_at: float | None) -> bool:
            return status in _FINISHED and finished_at is not None and finished_at < finished_before

        def lookup(statement: Statement) -> Callable[[list[str]], list[Relative]]:
            def fetch(ids: list[str]) -> list[Relative]:
                rows = self._execute(session, statement, {"ids": self._names(ids)}).fetchall()
                return [(run_id, parent, done(status, at)) for run_id, parent, status, at in rows]

            return fetch

        going: list[str] = []
        counted = 0
        while True:
            values = {
                "cutoff": finished_before,
                "after_created": after[0],
                "after_id": after[1],
                "window": window,
            }
            found = self._execute(session, self._sql.purge_candidates, values).fetchall()
            allowed = may_go(
                [(run_id, parent) for run_id, parent, _ in found],
                runs=lookup(self._sql.purge_relatives),
                children=lookup(self._sql.purge_children),
            )
            for run_id, _, created_at in found:
                after = (created_at, run_id)
                if run_id in allowed:
                    counted += 1
                    if keep:
                        going.append(run_id)
                    if counted == limit:
                        return going, counted, after
            if len(found) < window:
                return going, counted, after


def _action(row: Sequence[Any]) -> Action:
    return Action(id=row[0], run_id=row[1], action=row[2], actor=row[3], at=row[4], detail=row[5])
