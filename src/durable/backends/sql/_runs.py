"""The SQL backend's runs and leases: creating, finishing, claiming.

A mixin of `SQLBackend`; the statements are in `_statements/runs.py`. Writes that may
be retried after a lost connection read back whether their first attempt committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from durable.backends import _rows
from durable.backends._connections import Session
from durable.backends._group import GroupCommit, Rows, Then, Write, one_by_one
from durable.backends._statements.history import RECORD_ORDER
from durable.core.records import NewRun, Run, RunStatus, Step
from durable.core.run_options import claim_order, serving

from ._base import SQLBase

#: `finish_run_recording`'s parameters for the step, in `_rows.step_params`' order.
_STEP_PARAMS = tuple(f"step_{name}" for name in RECORD_ORDER)


class SQLRuns(SQLBase):
    """`RunStore` for `SQLBackend` (see there for the contracts)."""

    #: Group commit of new runs, and of outcomes (see `SQLBackend.__init__`).
    _new_runs: GroupCommit
    _outcomes: GroupCommit
    _wake_parents: Callable[[Session, Rows], Rows]
    _record_in: Callable[[Session, Step, int], tuple[Step, int] | None]
    #: from `SQLQueues`: claims that respect a queue's limits.
    _limited: set[str]
    _declares: Callable[[str], bool]
    _ensure_queue: Callable[[Session, str], None]
    _claim_limited: Callable[..., list[Run] | None]
    _claim_run_limited: Callable[[str, dict[str, Any], Session], Run | None]
    _with_attributes: Callable[[NewRun], Then]

    def now(self) -> float:
        """See `RunStore.now`."""
        return self._db.run(
            "Reading the clock",
            lambda conn, _: float(self._execute(conn, self._sql.now, {}).fetchone()[0]),
        )

    def create_run(self, new: NewRun) -> tuple[Run, bool]:
        """See `RunStore.create_run`."""
        owned = new.owner is not None
        values, status, epoch = _rows.new_run_values(new)
        statement = self._sql.create_owned_run if owned else self._sql.create_queued_run
        if new.key_limit is not None:  # its queue's claims must take the locked way
            self._db.run(
                f"Declaring queue {new.queue!r}",
                lambda conn, _: self._ensure_queue(conn, new.queue),
            )

        while True:
            # A run created for its owner (execute) skips its own fsync on SQLite:
            # whatever it does next that matters is a synced write (see _relaxed.py).
            then = self._with_attributes(new) if new.attributes else None
            params = statement.params(values)
            rows, retried = self._new_runs.write(
                statement.sql, params, then, name="Creating runs", synced=not owned
            )
            if rows:
                row = rows[0]
                if owned:
                    return _rows.created_run(new, row[0], row[1], row[2]), True
                self._hub.notify(row[0])
                return _rows.created_run(new, row[1], None, row[2]), True
            existing = self.get_run(new.id)
            if existing is None:
                continue  # deleted between the two statements; try again
            # Our own insert whose acknowledgement was lost looks exactly like this.
            ours = (
                retried
                and existing.lease_owner == new.owner
                and existing.epoch == epoch
                and existing.input == new.input
                and existing.call_hash == new.call_hash
                and (owned or existing.status is status)
            )
            return existing, ours

    def get_run(self, run_id: str) -> Run | None:
        """See `RunStore.get_run`."""

        def body(conn: Any, _retried: bool) -> Run | None:
            row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            return None if row is None else _rows.run(row)

        return self._db.run(f"Reading run {run_id!r}", body)

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
        """See `RunStore.finish_run`."""
        if last_step is not None and status is not RunStatus.BLOCKED:
            return self._finish_recording(
                run_id, epoch, status, output=output, error=error, step=last_step, state=state
            )
        if status is RunStatus.BLOCKED:
            statement = self._sql.block_run
            values: dict[str, Any] = {"id": run_id, "epoch": epoch, "error": error}
        else:
            statement = self._sql.finish_run
            values = {
                "id": run_id,
                "epoch": epoch,
                "status": status.value,
                "output": output,
                "error": error,
                "state": state,
            }

        if status is RunStatus.BLOCKED:  # rare: no need to batch it
            batch = [Write(statement.sql, statement.params(values))]
            one_by_one(self._db, f"Blocking run {run_id!r}", batch)
            if batch[0].error is not None:
                raise batch[0].error
            rows, retried = batch[0].rows, batch[0].retried
        else:
            # SQLite wakes a waiting parent in the same transaction; PostgreSQL's
            # statement does it itself. Replay reproduces an outcome, but not a DEAD
            # verdict: only the former may skip its own fsync (see _relaxed.py).
            then = None if self._sql.postgres else self._wake_parents
            rows, retried = self._outcomes.write(
                statement.sql,
                statement.params(values),
                then,
                name="Finishing runs",
                synced=status is RunStatus.DEAD,
            )
        return self._finished(run_id, epoch, status, rows, retried)

    def _finished(
        self, run_id: str, epoch: int, status: RunStatus, rows: Rows, retried: bool
    ) -> bool:
        """Whether `finish_run` set the outcome, from what its write returned."""
        if rows:
            self._announce(rows)
            return True
        if not retried:
            return False
        run = self.get_run(run_id)
        # A lost acknowledgement: our own earlier commit already set this outcome.
        return run is not None and run.epoch == epoch and run.status is status

    def _finish_recording(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        output: bytes | None,
        error: bytes | None,
        step: Step,
        state: bytes | None,
    ) -> bool:
        """`finish_run` with the run's last step, in one commit (synced: the step's
        result is not implied by the history, unlike a relaxed outcome's)."""
        values: dict[str, Any] = {
            "id": run_id, "epoch": epoch, "status": status.value, "output": output,
            "error": error, "state": state,
        }  # fmt: skip
        statement = self._sql.finish_run_recording
        if statement is not None:  # PostgreSQL: one statement
            values.update(zip(_STEP_PARAMS, _rows.step_params(step, epoch), strict=False))
            rows, retried = self._outcomes.write(
                statement.sql, statement.params(values), name="Finishing runs"
            )
            return self._finished(run_id, epoch, status, rows, retried)

        # SQLite: the step first, fenced as the outcome is (the run at our epoch and
        # unfinished), so that it is written exactly when the outcome is; then the
        # outcome, whose move counts the run's calls with this one among them.
        last, finish = self._sql.record_last, self._sql.finish_run
        assert last is not None

        def then(session: Session, _recorded: Rows) -> Rows:
            rows = list(session.execute(finish.sql, finish.params(values)).fetchall())
            return self._wake_parents(session, rows)

        recorded = _rows.step_params(step, epoch)[: len(last.order)]
        rows, retried = self._outcomes.write(last.sql, recorded, then, name="Finishing runs")
        return self._finished(run_id, epoch, status, rows, retried)

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
        """See `RunStore.claim_run`."""
        values = {
            "id": run_id,
            "epoch": epoch,
            "owner": owner,
            "lease": lease,
            "dead_owner": dead_owner,
            "version": version,
            "only": serving(version, only_version),
        }

        def body(conn: Any, retried: bool) -> Run | None:
            row = self._execute(conn, self._sql.claim_run, values).fetchone()
            if row is not None:
                return _rows.run(row)
            if retried:
                current = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
                if current is not None and current[7] == epoch + 1 and current[8] == owner:
                    return _rows.run(current)
            # Refused: not claimable, or its queue declares limits (the locked way).
            with self._db.transaction(conn):
                return self._claim_run_limited(run_id, values, conn)

        return self._db.run(f"Claiming run {run_id!r}", body)

    def mark_progress(self, run_id: str, epoch: int) -> None:
        """See `RunStore.mark_progress`."""
        self._db.run(
            f"Marking progress of run {run_id!r}",
            lambda conn, _: self._execute(
                conn, self._sql.mark_progress, {"id": run_id, "epoch": epoch}
            ),
        )

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
        """See `RunStore.claim_next`."""
        versions = {"version": version, "only": serving(version, only_version)}
        if queue in self._limited:
            limited = self._claim_limited(
                owner=owner, queue=queue, workflows=workflows, limit=limit, lease=lease,
                versions=versions,
            )  # fmt: skip
            if limited is not None:
                return sorted(limited, key=claim_order)
            self._limited.discard(queue)
        values = {
            "owner": owner,
            "lease": lease,
            "queue": queue,
            "workflows": self._names(list(workflows)),
            "limit": limit,
            **versions,
        }
        # Not retried on a lost connection: a claim that committed unseen is not ours to
        # find again; those runs come back to the queue when their lease expires.
        rows = self._db.run(
            "Claiming queued runs",
            lambda conn, retried: (
                [] if retried else self._execute(conn, self._sql.claim_next, values).fetchall()
            ),
        )
        if not rows and self._declares(queue):  # refused by the guard: limits
            limited = self._claim_limited(
                owner=owner, queue=queue, workflows=workflows, limit=limit, lease=lease,
                versions=versions,
            )  # fmt: skip
            return sorted(limited or [], key=claim_order)
        # RETURNING comes in the update's scan order, not the subquery's.
        # claim_order: a row with a priority of another type sorts last, not raises.
        return sorted(map(_rows.run, rows), key=claim_order)

    def queued_workflows(self, queues: Sequence[str]) -> Sequence[str]:
        """See `RunStore.queued_workflows`."""
        values = {"queues": self._names(list(queues))}
        return self._db.run(
            "Listing queued workflows",
            lambda conn, _: [
                row[0] for row in self._execute(conn, self._sql.queued_workflows, values).fetchall()
            ],
        )

    def recoverable(self, *, host: str) -> Sequence[Run]:
        """See `RunStore.recoverable`."""
        prefix = f"{host}:"
        return self._db.run(
            "Looking for runs to recover",
            lambda conn, _: [
                _rows.run(row)
                for row in self._execute(
                    conn, self._sql.recoverable, {"prefix": prefix, "prefix_len": len(prefix)}
                ).fetchall()
            ],
        )

    def renew_leases(self, owner: str, lease: float) -> int:
        """See `RunStore.renew_leases`."""
        return self._db.run(
            "Renewing leases",
            lambda conn, _: int(
                self._execute(
                    conn, self._sql.renew_leases, {"owner": owner, "lease": lease}
                ).rowcount
            ),
        )

    def release_run(self, run_id: str, epoch: int) -> bool:
        """See `RunStore.release_run`."""

        def body(conn: Any, _retried: bool) -> bool:
            rows = self._execute(
                conn, self._sql.release_run, {"id": run_id, "epoch": epoch}
            ).fetchall()
            self._announce(rows)
            return bool(rows)

        return self._db.run(f"Releasing run {run_id!r}", body)
