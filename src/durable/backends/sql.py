"""SQLBackend: the Backend contract on SQLite (stdlib driver) and PostgreSQL (psycopg 3).

The statements live in `_statements/`, compiled once per dialect; connections in
`_connections.py`; notifications from other processes in `_listener.py`. This module
runs the compiled statements, maps rows to records, tells its own lost-acknowledgement
commits apart from other writers', and notifies waiters in this process.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, make_url

from durable.core.records import NewRun, Run, RunStatus, Step
from durable.errors import ConfigurationError, LeaseLost

from . import _rows, _schema
from ._connections import Connections, postgres_opener, sqlite_opener, sqlite_synchronous
from ._group import GroupCommit, Write, in_one_transaction, one_by_one
from ._hub import Hub, Watch
from ._listener import Listener
from ._purging import Relative, may_go
from ._relaxed import RelaxedCommits
from ._sql_inspect import SQLInspectMixin
from ._sql_waits import SQLWaitsMixin
from ._statements import Queries
from ._statements.base import CHANNEL, Statement

#: Other processes cannot notify a SQLite waiter, so its waits poll this often.
SQLITE_POLL = 0.05
#: How many old finished runs `purge` reads at a time while looking for runs to delete.
PURGE_WINDOW = 1000
_FINISHED = frozenset(status.value for status in RunStatus if status.finished)


class SQLBackend(SQLWaitsMixin, SQLInspectMixin):
    """A backend on SQLite or PostgreSQL.

    Args:
        url: ``sqlite:///path/to/file.db`` (optionally ``?synchronous=NORMAL``) or
            ``postgresql://user:password@host:port/database``.
        busy_timeout: seconds a SQLite write waits for the file lock.
    """

    def __init__(self, url: str | URL, *, busy_timeout: float = 30.0) -> None:
        self.url = make_url(url)
        masked = self.url.render_as_string(hide_password=True)
        kind = self.url.get_backend_name()
        relax = None
        if kind == "sqlite":
            self._dialect: sa.Dialect = sqlite_dialect.dialect()
            options = {k: str(v) for k, v in self.url.query.items()}
            opener = sqlite_opener(self.url.database, options, busy_timeout=busy_timeout)
            synchronous = sqlite_synchronous(options)
            if synchronous != "NORMAL":  # see _relaxed.py: outcomes need no fsync of their own
                relax = RelaxedCommits(Path(str(self.url.database)).absolute(), synchronous)
        elif kind == "postgresql":
            # Positional $1 parameters, as psycopg's RawCursor takes them unconverted;
            # hot statements get a plain tuple.
            self._dialect = pg_dialect.psycopg.dialect(paramstyle="numeric_dollar")  # type: ignore[no-untyped-call]
            conninfo = self.url.set(drivername="postgresql").render_as_string(hide_password=False)
            opener = postgres_opener(conninfo)
        else:
            raise ConfigurationError(
                f"Unsupported database URL {masked!r}: durable speaks sqlite:/// and "
                "postgresql://, or memory:// for tests."
            )
        self.masked_url = masked
        self.dialect_name: str = kind
        self._db = Connections(
            kind, opener, masked_url=masked, password=self.url.password, relax=relax
        )
        self._sql = Queries(self._dialect)
        # Group commit (see _group.py). PostgreSQL: one queue per kind of write, each
        # batch one multi-row statement, and the kinds commit side by side. SQLite has
        # one writer at a time: one queue for all three, so that this process's writers
        # never meet each other at the file lock (whose busy handler sleeps for
        # milliseconds), and every batch is one transaction whatever it holds.
        if kind == "sqlite":
            shared = GroupCommit(in_one_transaction(self._db, "Writing runs and steps"))
            self._steps = self._outcomes = self._new_runs = shared
        else:
            self._steps = GroupCommit(self._write_steps)
            self._outcomes = GroupCommit(self._write_outcomes)
            self._new_runs = GroupCommit(in_one_transaction(self._db, "Creating runs"))
        self._hub = Hub()
        self._listener: Listener | None = None
        #: (cutoff, the last run looked at) of the last purge: see `purge`.
        self._purged_to: tuple[float, tuple[float, str]] | None = None
        self._listener_lock = threading.Lock()
        # SQLite takes lists as JSON arrays (json_each); psycopg adapts Python lists.
        self._names = json.dumps if kind == "sqlite" else list
        try:
            self._db.run(
                "Creating the schema",
                lambda conn, _: _schema.migrate(conn, self._db, self._dialect),
            )
        except BaseException:
            self.close()
            raise

    def _execute(self, conn: Any, statement: Statement, values: Mapping[str, Any]) -> Any:
        return conn.execute(statement.sql, statement.params(values))

    # -- group commit ---------------------------------------------------------------

    def _write_steps(self, batch: list[Write]) -> None:
        """Record a batch of steps (PostgreSQL): one multi-row statement."""
        if len(batch) == 1:
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

    def _write_outcomes(self, batch: list[Write]) -> None:
        """Finish a batch of runs (PostgreSQL): one multi-row statement."""
        if len(batch) == 1:
            in_one_transaction(self._db, "Finishing runs")(batch)
            return
        order = self._sql.finish_run.order
        columns = {
            f"{name}s": [write.params[order.index(name)] for write in batch]
            for name in ("id", "epoch", "status", "output", "error")
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

    # -- the Backend contract -------------------------------------------------------

    def now(self) -> float:
        """See `Backend.now`."""
        return self._db.run(
            "Reading the clock",
            lambda conn, _: float(self._execute(conn, self._sql.now, {}).fetchone()[0]),
        )

    def create_run(self, new: NewRun) -> tuple[Run, bool]:
        """See `Backend.create_run`."""
        owned = new.owner is not None
        status = RunStatus.RUNNING if owned else RunStatus.QUEUED
        epoch = 1 if owned else 0
        values = {
            "id": new.id,
            "workflow": new.workflow,
            "status": status.value,
            "input": new.input,
            "call_hash": new.call_hash,
            "epoch": epoch,
            "owner": new.owner,
            "lease": new.lease if owned else None,
            "parent_id": new.parent_id,
            "queue": new.queue,
            "priority": new.priority,
            "owned": int(owned),
        }
        statement = self._sql.create_owned_run if owned else self._sql.create_queued_run

        while True:
            rows, retried = self._new_runs.write(
                statement.sql, statement.params(values), name="Creating runs"
            )
            if rows:
                row = rows[0]
                if owned:
                    created_at, lease_until = row[0], row[1]
                else:
                    self._hub.notify(row[0])
                    created_at, lease_until = row[1], None
                run = Run(
                    id=new.id,
                    workflow=new.workflow,
                    status=status,
                    input=new.input,
                    call_hash=new.call_hash,
                    output=None,
                    error=None,
                    epoch=epoch,
                    lease_owner=new.owner,
                    lease_until=lease_until,
                    recoveries=0,
                    parent_id=new.parent_id,
                    created_at=created_at,
                    updated_at=created_at,
                    finished_at=None,
                    queue=new.queue,
                    priority=new.priority,
                    started_at=created_at if owned else None,
                )
                return run, True
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
                and (owned or existing.status is RunStatus.QUEUED)
            )
            return existing, ours

    def get_run(self, run_id: str) -> Run | None:
        """See `Backend.get_run`."""

        def body(conn: Any, _retried: bool) -> Run | None:
            row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            return None if row is None else _rows.run(row)

        return self._db.run(f"Reading run {run_id!r}", body)

    def load_history(self, run_id: str) -> Sequence[Step]:
        """See `Backend.load_history`."""
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

    def record(self, step: Step, epoch: int) -> tuple[Step, bool]:
        """See `Backend.record`."""
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
                    return stored, False
            else:
                rows, _ = self._steps.write(self._sql.record.sql, values, name="Recording steps")
                if rows:  # the run's cancellation flag
                    return stored, bool(rows[0][0])
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
                return found, bool(row[1])
            if quiet is not None and row[1]:
                quiet = None  # record it anyway; the flag comes back with it
            # else: pragma: no cover - the row vanished in between (purged?); write again

    def _record_in(self, session: Any, step: Step, epoch: int) -> tuple[Step, bool] | None:
        """Record *step* on *session* (inside the caller's transaction); None if nothing
        was written (fenced off, or the position is finished)."""
        values = _rows.step_params(step, epoch)
        if self._sql.record_permutation is not None:
            values = tuple(values[i] for i in self._sql.record_permutation)
        row = session.execute(self._sql.record.sql, values).fetchone()
        if row is None:
            return None
        stored = step if step.epoch == epoch else dataclasses.replace(step, epoch=epoch)
        return stored, bool(row[0])

    def finish_run(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        output: bytes | None = None,
        error: bytes | None = None,
    ) -> bool:
        """See `Backend.finish_run`."""
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
        if rows:
            self._announce(rows)
            return True
        if not retried:
            return False
        run = self.get_run(run_id)
        # A lost acknowledgement: our own earlier commit already set this outcome.
        return run is not None and run.epoch == epoch and run.status is status

    def claim_run(
        self, run_id: str, *, owner: str, lease: float, epoch: int, dead_owner: str | None = None
    ) -> Run | None:
        """See `Backend.claim_run`."""
        values = {
            "id": run_id,
            "epoch": epoch,
            "owner": owner,
            "lease": lease,
            "dead_owner": dead_owner,
        }

        def body(conn: Any, retried: bool) -> Run | None:
            row = self._execute(conn, self._sql.claim_run, values).fetchone()
            if row is not None:
                return _rows.run(row)
            if retried:
                current = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
                if current is not None and current[7] == epoch + 1 and current[8] == owner:
                    return _rows.run(current)
            return None

        return self._db.run(f"Claiming run {run_id!r}", body)

    def mark_progress(self, run_id: str, epoch: int) -> None:
        """See `Backend.mark_progress`."""
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
    ) -> Sequence[Run]:
        """See `Backend.claim_next`."""
        values = {
            "owner": owner,
            "lease": lease,
            "queue": queue,
            "workflows": self._names(list(workflows)),
            "limit": limit,
        }
        # Not retried on a lost connection: a claim that committed unseen is not ours to
        # find again; those runs come back to the queue when their lease expires.
        rows = self._db.run(
            "Claiming queued runs",
            lambda conn, retried: (
                [] if retried else self._execute(conn, self._sql.claim_next, values).fetchall()
            ),
        )
        # RETURNING comes in the update's scan order, not the subquery's.
        return sorted(map(_rows.run, rows), key=lambda run: (-run.priority, run.created_at))

    def queued_workflows(self, queues: Sequence[str]) -> Sequence[str]:
        """See `Backend.queued_workflows`."""
        values = {"queues": self._names(list(queues))}
        return self._db.run(
            "Listing queued workflows",
            lambda conn, _: [
                row[0] for row in self._execute(conn, self._sql.queued_workflows, values).fetchall()
            ],
        )

    def recoverable(self, *, host: str) -> Sequence[Run]:
        """See `Backend.recoverable`."""
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
        """See `Backend.renew_leases`."""
        return self._db.run(
            "Renewing leases",
            lambda conn, _: int(
                self._execute(
                    conn, self._sql.renew_leases, {"owner": owner, "lease": lease}
                ).rowcount
            ),
        )

    def release_run(self, run_id: str, epoch: int) -> bool:
        """See `Backend.release_run`."""

        def body(conn: Any, _retried: bool) -> bool:
            rows = self._execute(
                conn, self._sql.release_run, {"id": run_id, "epoch": epoch}
            ).fetchall()
            self._announce(rows)
            return bool(rows)

        return self._db.run(f"Releasing run {run_id!r}", body)

    def cancel_run(self, run_id: str) -> Run | None:
        """See `Backend.cancel_run`."""

        def body(conn: Any, _retried: bool) -> Run | None:
            with self._db.transaction(conn):
                cancelled = self._execute(conn, self._sql.cancel_now, {"id": run_id}).fetchall()
                changed = [
                    (topic,)
                    for row in self._execute(
                        conn, self._sql.cancel_waiting, {"id": run_id}
                    ).fetchall()
                    for topic in row[:2]
                ]
                changed += self._execute(conn, self._sql.cancel_request, {"id": run_id}).fetchall()
                # Parents last: one in the tree, waiting on a child cancelled just now,
                # has been queued with its cancel request above; woken first, it would
                # be QUEUED without one, and cancel_waiting would pass it by.
                changed += self._wake_parents(conn, [(row[0], row[1]) for row in cancelled])
                row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            self._announce(changed)
            return None if row is None else _rows.run(row)

        return self._db.run(f"Cancelling run {run_id!r}", body)

    def purge(self, *, finished_before: float, limit: int, dry_run: bool = False) -> int:
        """See `Backend.purge`. Finding the runs and deleting them is one transaction
        (``BEGIN IMMEDIATE`` on SQLite); a dry run only reads.

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

    def watch(self, topics: Sequence[str]) -> Watch:
        """See `Backend.watch`. PostgreSQL hears other processes through LISTEN; SQLite
        waits poll every SQLITE_POLL seconds."""
        if self.dialect_name == "sqlite":
            return self._hub.watch(topics, cap=SQLITE_POLL)
        with self._listener_lock:
            if self._listener is None or not self._listener.alive():
                self._listener = Listener(self._db.open, self._hub, CHANNEL)
        return self._hub.watch(topics)

    def close(self) -> None:
        """Stop listening and close idle connections; connections in use close when
        they come back."""
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        self._db.close()
        self._hub.notify_all()
