"""The SQL backend's writes of many rows at once: runs created in one statement
(`create_runs`, for a batch of schedule ticks), and the group commit of outcomes on
PostgreSQL (`_write_outcomes`: the finished runs of concurrent callers in one
statement, see _group.py).

A mixin of `SQLBackend`, beside `_runs.py`, whose single-row writes these are the bulk
forms of.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable.backends import _rows
from durable.backends._connections import Session
from durable.backends._group import Write, in_one_transaction, one_by_one
from durable.core.records import NewRun

from ._base import SQLBase


class SQLMany(SQLBase):
    """`RunStore.create_runs`, and the outcome batches of group commit."""

    def create_runs(self, news: Sequence[NewRun]) -> Sequence[str]:
        """See `RunStore.create_runs`: one statement on PostgreSQL, one transaction on
        SQLite."""
        if not news:
            return []
        if self._sql.postgres:
            columns = {
                "ids": [new.id for new in news],
                "workflows": [new.workflow for new in news],
                "inputs": [new.input for new in news],
                "call_hashs": [new.call_hash for new in news],
                "queues": [new.queue for new in news],
                "prioritys": [new.priority for new in news],
                "timeouts": [new.timeout for new in news],
                "wake_ats": [new.start_at for new in news],
                "versions": [new.version for new in news],
                "trace_contexts": [new.trace_context for new in news],
                "event_schemass": [new.event_schemas for new in news],
            }
            statement = self._sql.create_queued_runs

            def many(conn: Any, _retried: bool) -> list[str]:
                # Again after a lost commit: the runs it made exist, and are not ours to
                # report (their ticks still fire once: the ids are the ticks').
                rows = self._execute(conn, statement, columns).fetchall()
                self._announce(rows)
                return [row[1] for row in rows]

            return self._db.run("Creating runs", many)
        single = self._sql.create_queued_run

        def each(session: Session, _retried: bool) -> list[str]:
            made = []
            with self._db.transaction(session):
                for new in news:
                    values, _, _ = _rows.new_run_values(new)
                    rows = self._execute(session, single, values).fetchall()
                    if rows:
                        made.append(new.id)
                        self._hub.notify(rows[0][0])
            return made

        return self._db.run("Creating runs", each)

    def _write_outcomes(self, batch: list[Write]) -> None:
        """Finish a batch of runs (PostgreSQL): one multi-row statement."""
        if len(batch) == 1 or any(write.sql != self._sql.finish_run.sql for write in batch):
            # alone, or with outcomes that record a step: each its own statement
            in_one_transaction(self._db, "Finishing runs")(batch)
            return
        order = self._sql.finish_run.order
        columns = {
            f"{name}s": [write.params[order.index(name)] for write in batch]
            for name in ("id", "epoch", "status", "output", "error", "state")
        }
        try:
            rows = self._db.run(
                "Finishing runs",
                lambda conn, _: self._execute(conn, self._sql.finish_many, columns).fetchall(),
            )
        except Exception:
            for write in batch:
                write.retried = True
            one_by_one(self._db, "Finishing runs", batch)
            return
        self._announce(rows)  # the runs' topics, and their woken parents'
        topics = {row[0] for row in rows}
        id_at = order.index("id")
        for write in batch:
            topic = f"run:{write.params[id_at]}"
            write.finish([(topic,)] if topic in topics else [])
