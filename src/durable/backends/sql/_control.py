"""The SQL backend's control of runs from outside: cancelling, pausing, resuming, forking.

A mixin of `SQLBackend`; the statements are in `_statements/control.py`. Each call is
one transaction over the run and everything below it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from durable.backends import _rows
from durable.backends._connections import Session
from durable.backends._group import Rows
from durable.core.records import NewRun, Run, RunStatus

from ._base import SQLBase


class SQLControl(SQLBase):
    """`ControlStore` for `SQLBackend` (see there for the contracts)."""

    _wake_parents: Callable[[Session, Rows], Rows]
    _ensure_queue: Callable[[Session, str], None]
    _copy_attributes: Callable[[Any, str, str], None]

    def cancel_run(self, run_id: str) -> Run | None:
        """See `ControlStore.cancel_run`."""

        def body(conn: Any, _retried: bool) -> Run | None:
            with self._db.transaction(conn):
                cancelled = self._execute(conn, self._sql.cancel_now, {"id": run_id}).fetchall()
                changed = self._topics(conn, self._sql.cancel_waiting, run_id)
                changed += self._execute(conn, self._sql.cancel_request, {"id": run_id}).fetchall()
                # Parents last: one in the tree, waiting on a child cancelled just now,
                # has been queued with its cancel request above; woken first, it would
                # be QUEUED without one, and cancel_waiting would pass it by.
                changed += self._wake_parents(conn, [(row[0], row[1]) for row in cancelled])
                row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            self._announce(changed)
            return None if row is None else _rows.run(row)

        return self._db.run(f"Cancelling run {run_id!r}", body)

    def pause_run(self, run_id: str) -> Run | None:
        """See `ControlStore.pause_run`."""

        def body(conn: Any, _retried: bool) -> Run | None:
            with self._db.transaction(conn):
                changed = self._execute(conn, self._sql.pause_idle, {"id": run_id}).fetchall()
                changed += self._execute(conn, self._sql.pause_request, {"id": run_id}).fetchall()
                row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            self._announce(changed)
            return None if row is None else _rows.run(row)

        return self._db.run(f"Pausing run {run_id!r}", body)

    def resume_run(self, run_id: str, *, drop_from: int | None = None) -> Run | None:
        """See `ControlStore.resume_run`."""

        def body(conn: Any, _retried: bool) -> Run | None:
            with self._db.transaction(conn):
                row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
                if row is None:
                    return None
                changed: list[Any] = []
                if _rows.RUN_STATUS[row[2]] is RunStatus.CANCELLED and drop_from is not None:
                    dropped = {"id": run_id, "position": drop_from}
                    self._execute(conn, self._sql.drop_steps, dropped)
                    self._execute(conn, self._sql.unconsume, dropped)
                    changed += self._execute(conn, self._sql.reopen, {"id": run_id}).fetchall()
                changed += self._topics(conn, self._sql.resume_paused, run_id)
                changed += self._execute(conn, self._sql.resume_request, {"id": run_id}).fetchall()
                row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            self._announce(changed)
            return None if row is None else _rows.run(row)

        return self._db.run(f"Resuming run {run_id!r}", body)

    def fork_run(self, original_id: str, new: NewRun, *, before: int) -> Run | None:
        """See `ControlStore.fork_run`."""
        values, _, _ = _rows.new_run_values(new, queued=True)

        def body(conn: Any, retried: bool) -> Run | None:
            with self._db.transaction(conn):
                if self._execute(conn, self._sql.get_run, {"id": original_id}).fetchone() is None:
                    return None
                created = self._execute(conn, self._sql.create_queued_run, values).fetchall()
                if created:
                    # Its queue's claims must take the locked way: the queue's row, in
                    # the same commit (none for a fork refused because its id is taken).
                    if new.key_limit is not None:
                        self._ensure_queue(conn, new.queue)
                    copy = {"id": new.id, "original": original_id, "before": before}
                    self._execute(conn, self._sql.fork_steps, copy)
                    self._copy_attributes(conn, original_id, new.id)
                row = self._execute(conn, self._sql.get_run, {"id": new.id}).fetchone()
            self._announce(created)
            existing = None if row is None else _rows.run(row)
            if created:
                return existing
            # A commit whose acknowledgement was lost, retried, finds its own fork.
            ours = retried and existing is not None and existing.origin == original_id
            return existing if ours else None

        return self._db.run(f"Forking run {original_id!r}", body)

    def cancelling(self, owner: str) -> Sequence[str]:
        """See `ControlStore.cancelling`."""
        return self._db.run(
            "Reading the runs asked to cancel",
            lambda conn, _: [
                row[0] for row in self._execute(conn, self._sql.cancelling, {"owner": owner})
            ],
        )

    def park_run(self, run_id: str, epoch: int) -> RunStatus | None:
        """See `ControlStore.park_run`."""

        def body(conn: Any, _retried: bool) -> RunStatus | None:
            with self._db.transaction(conn):
                rows = self._execute(
                    conn, self._sql.park, {"id": run_id, "epoch": epoch}
                ).fetchall()
            self._announce([(topic,) for row in rows for topic in row[:2]])
            return _rows.RUN_STATUS[rows[0][2]] if rows else None

        return self._db.run(f"Pausing run {run_id!r} here", body)

    def _topics(self, conn: Any, statement: Any, run_id: str) -> list[Any]:
        """Run a `_waking` *statement* on the tree of *run_id*; its topics, as rows."""
        rows = self._execute(conn, statement, {"id": run_id}).fetchall()
        return [(topic,) for row in rows for topic in row[:2]]
