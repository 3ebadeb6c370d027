"""The SQL backend's histories: loading a run's steps and recording them.

A mixin of `SQLBackend`; the statements are in `_statements/history.py`. Recording a
step is the hottest write: its parameters are built as a tuple, and steps of
concurrent runs share commits (group commit, see `_group.py`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from durable.backends import _rows
from durable.backends._connections import Session
from durable.backends._group import GroupCommit, Write, in_one_transaction, one_by_one
from durable.backends._statements.history import ABORTED, PAIR_NULLS
from durable.core.records import CANCEL_REQUEST, Step, either
from durable.errors import LeaseLost

from ._base import SQLBase

#: What `record_pair_nulls` picks when a pair can take `record_pair_lean`.
_PAIR_NONES = (None,) * sum(map(len, PAIR_NULLS))


class SQLHistory(SQLBase):
    """`HistoryStore` for `SQLBackend` (see there for the contracts)."""

    #: Group commit of steps (see `SQLBackend.__init__`).
    _steps: GroupCommit

    def load_history(self, run_id: str) -> Sequence[Step]:
        """See `HistoryStore.load_history`."""
        return self._db.run(
            f"Loading the history of run {run_id!r}",
            lambda conn, _: [
                _rows.step(row)
                # fetchall: iterating a psycopg cursor row by row costs 3 us a row.
                for row in self._execute(
                    conn, self._sql.load_history, {"run_id": run_id}
                ).fetchall()
            ],
        )

    def record(self, step: Step, epoch: int) -> tuple[Step, int]:
        """See `HistoryStore.record`."""
        values = _rows.step_params(step, epoch)
        if self._sql.record_permutation is not None:
            values = tuple(values[i] for i in self._sql.record_permutation)
        stored = step if step.epoch == epoch else dataclasses.replace(step, epoch=epoch)
        quiet = self._sql.record_quiet  # SQLite; it refuses a run with a cancel request
        while True:
            if quiet is not None:
                rows, _ = self._steps.write(
                    quiet.sql, values[: len(quiet.order)], name="Recording steps"
                )
                if rows[0][0]:  # the row count
                    return stored, 0
            else:
                rows, _ = self._steps.write(self._sql.record.sql, values, name="Recording steps")
                if rows:  # the run's cancellation flag
                    return stored, int(rows[0][0])
            # Nothing written: fenced off, the position is finished (by our own earlier
            # attempt whose acknowledgement was lost, or by a former owner), or (quiet)
            # the run has a cancel request.
            row = self._db.run(
                f"Recording position {step.position} of run {step.run_id!r}",
                lambda conn, _: self._execute(
                    conn,
                    self._sql.record_conflict,
                    {"run_id": step.run_id, "position": step.position},
                ).fetchone(),
            )
            if row is None or row[0] != epoch:
                raise LeaseLost(
                    f"Run {step.run_id!r} is no longer at epoch {epoch}; another owner took it "
                    "over, so this process may not record its steps.",
                    run_id=step.run_id,
                    epoch=epoch,
                )
            found = None if row[2] is None else _rows.step(row[2:])
            if found is not None and found.status.finished:
                return found, int(row[1])
            if quiet is not None and row[1]:
                quiet = None  # record it anyway; the flag comes back with it
            # else: pragma: no cover - the row vanished in between (purged?); write again

    def record_steps(self, steps: Sequence[Step], epoch: int) -> tuple[list[Step], int]:
        """See `HistoryStore.record_steps`."""
        if len(steps) == 1:
            stored, cancel = self.record(steps[0], epoch)
            return [stored], cancel

        pair = self._record_pair(steps, epoch)
        if pair is not None:
            return pair

        # Not all written: a newer owner, a cancel request (SQLite), or a position
        # already finished (by an earlier attempt of this very write whose
        # acknowledgement was lost). `record` tells which, step by step, in order.
        outcomes = [self.record(step, epoch) for step in steps]
        return [stored for stored, _ in outcomes], either(flags for _, flags in outcomes)

    def _record_pair(self, steps: Sequence[Step], epoch: int) -> tuple[list[Step], int] | None:
        """The steps in one statement (one round trip, one commit); None if not all
        were written (the caller then finds out which, one by one)."""
        if len(steps) != 2:
            return None
        both = _rows.step_params(steps[0], epoch) + _rows.step_params(steps[1], epoch)
        sql = self._sql
        if sql.record_pair_nulls(both) == _PAIR_NONES:  # as nearly always: see there
            statement, params = sql.record_pair_lean, sql.record_pair_lean_picks(both)
        else:
            statement, params = sql.record_pair, sql.record_pair_picks(both)
        rows, _ = self._steps.write(statement.sql, params, name="Recording steps", refused=ABORTED)
        if self._sql.record_quiet is not None:  # SQLite: the row count; refused on cancel
            if rows[0][0] != 2:
                return None
            cancel = 0
        elif len(rows) == 2:  # PostgreSQL: each written row, with the cancellation flag
            cancel = int(rows[0][0])
        else:
            return None
        stored = [s if s.epoch == epoch else dataclasses.replace(s, epoch=epoch) for s in steps]
        return stored, cancel

    def heartbeat(
        self,
        run_id: str,
        position: int,
        epoch: int,
        attempt: int,
        details: bytes | None,
        *,
        gap: float | None = None,
    ) -> bool:
        """See `HistoryStore.heartbeat`."""
        values = {
            "run_id": run_id, "position": position, "epoch": epoch, "attempt": attempt,
            "details": details, "gap": gap,
        }  # fmt: skip
        statement = self._sql.heartbeat
        # Liveness and progress, rewritten every few seconds: no fsync of its own on
        # SQLite (a power cut may lose the last one; the attempt resumes from an earlier).
        rows, _ = self._steps.write(
            statement.sql, statement.params(values), name="Writing a heartbeat", synced=False
        )
        if rows[0][0]:  # the row count
            return False
        found = self._db.run(
            f"Reading why a heartbeat of run {run_id!r} was refused",
            lambda conn, _: self._execute(
                conn, self._sql.heartbeat_check, {"run_id": run_id, "position": position}
            ).fetchone(),
        )
        if found is not None and (found[0], found[1] & CANCEL_REQUEST, *found[2:]) == (
            epoch,
            CANCEL_REQUEST,
            "running",
            attempt,
        ):
            return True  # cancelled: nothing written, the attempt is to stop
        raise LeaseLost(
            f"Run {run_id!r} no longer runs attempt {attempt} at position {position} under "
            f"epoch {epoch}: another owner took it over, or it ended.",
            run_id=run_id,
            epoch=epoch,
        )

    def _record_in(self, session: Session, step: Step, epoch: int) -> tuple[Step, int] | None:
        """Record *step* on *session* (inside the caller's transaction); None if nothing
        was written (fenced off, or the position is finished)."""
        values = _rows.step_params(step, epoch)
        if self._sql.record_permutation is not None:
            values = tuple(values[i] for i in self._sql.record_permutation)
        row = session.execute(self._sql.record.sql, values).fetchone()
        if row is None:
            return None
        stored = step if step.epoch == epoch else dataclasses.replace(step, epoch=epoch)
        return stored, int(row[0])

    def _write_steps(self, batch: list[Write]) -> None:
        """Record a batch of steps (PostgreSQL): one multi-row statement."""
        if len(batch) == 1 or any(write.sql != self._sql.record.sql for write in batch):
            # alone, or with pairs (`_record_pair`) among them: each its own statement
            in_one_transaction(self._db, "Recording steps")(batch)
            return
        order = self._sql.record.order
        columns = {
            f"{name}s": [write.params[order.index(name)] for write in batch]
            for name in self._sql.history_columns
        }
        try:
            rows = self._db.run(
                "Recording steps",
                lambda conn, _: self._execute(conn, self._sql.record_many, columns).fetchall(),
            )
        except Exception:
            for write in batch:
                write.retried = True
            one_by_one(self._db, "Recording steps", batch)
            return
        flags = {(run_id, position): flag for run_id, position, flag in rows}
        run_id_at, position_at = order.index("run_id"), order.index("position")
        for write in batch:
            key = (write.params[run_id_at], write.params[position_at])
            write.finish([(flags[key],)] if key in flags else [])
