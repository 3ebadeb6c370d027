"""The SQL backend's operator side: listing runs, statistics, retries, the actions log.

A mixin of `SQLBackend`; the statements are in `_statements/inspection.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from durable.core.records import Action, Outcome, Run, RunQuery, RunStatus

from . import _rows
from ._connections import Connections
from ._statements import Queries
from ._statements.base import Statement
from ._statements.inspection import query_values


class SQLInspectMixin:
    """Inspecting and operating runs for `SQLBackend` (see `Backend` for the contracts)."""

    _db: Connections
    _sql: Queries
    _names: Callable[[Sequence[Any]], Any]
    _execute: Callable[[Any, Statement, Mapping[str, Any]], Any]
    _announce: Callable[[Sequence[Sequence[Any]]], None]

    def list_runs(self, query: RunQuery, *, limit: int) -> Sequence[Run]:
        """See `Backend.list_runs`."""
        values = self._query_values(query)
        statement = self._sql.inspect.listing(values, count=False)
        values["limit"] = max(1, limit)
        return self._db.run(
            "Listing runs",
            lambda conn, _: [
                _rows.run(row) for row in self._execute(conn, statement, values).fetchall()
            ],
        )

    def count_runs(self, query: RunQuery) -> int:
        """See `Backend.count_runs`."""
        values = self._query_values(query)
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
        self, kind: Literal["run", "task"], *, since: float, name: str | None = None
    ) -> Sequence[Outcome]:
        """See `Backend.outcomes`."""
        values: dict[str, Any] = {"since": since}
        if kind == "run":
            statement = self._sql.run_outcomes
        elif name is None:
            statement = self._sql.task_outcomes
        else:
            statement, values["name"] = self._sql.named_task_outcomes, name
        rows = self._db.run(
            "Reading outcomes", lambda conn, _: self._execute(conn, statement, values).fetchall()
        )
        found = [Outcome(name=r[0], status=r[1], started_at=r[2], finished_at=r[3]) for r in rows]
        if kind == "run" and name is not None:
            found = [outcome for outcome in found if outcome.name == name]
        return found

    def retry_run(self, run_id: str, positions: Sequence[int]) -> Run | None:
        """See `Backend.retry_run`."""

        def body(conn: Any, _retried: bool) -> tuple[Run | None, list[Any]]:
            with self._db.transaction(conn):
                status = self._execute(conn, self._sql.lock_for_retry, {"id": run_id}).fetchone()
                topics: list[Any] = []
                if status is not None and RunStatus(status[0]) in (
                    RunStatus.FAILED,
                    RunStatus.DEAD,
                ):
                    if positions:
                        reopen = {"id": run_id, "positions": self._names(list(positions))}
                        self._execute(conn, self._sql.reopen_steps, reopen)
                    topics = self._execute(conn, self._sql.requeue, {"id": run_id}).fetchall()
                row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            return (None if row is None else _rows.run(row)), topics

        run, topics = self._db.run(f"Retrying run {run_id!r}", body)
        self._announce(topics)
        return run

    def record_action(self, run_id: str, action: str, *, actor: str | None, detail: str) -> Action:
        """See `Backend.record_action`."""
        values = {"id": run_id, "action": action, "actor": actor, "detail": detail}

        def body(conn: Any, _retried: bool) -> Action:
            with self._db.transaction(conn):
                row = self._execute(conn, self._sql.add_action, values).fetchone()
            return _action(row)

        return self._db.run(f"Recording {action} of run {run_id!r}", body)

    def actions(self, run_id: str) -> Sequence[Action]:
        """See `Backend.actions`."""
        statement = self._sql.actions
        return self._db.run(
            f"Reading the actions on run {run_id!r}",
            lambda conn, _: [
                _action(row) for row in self._execute(conn, statement, {"id": run_id}).fetchall()
            ],
        )


def _action(row: Sequence[Any]) -> Action:
    return Action(id=row[0], run_id=row[1], action=row[2], actor=row[3], at=row[4], detail=row[5])
