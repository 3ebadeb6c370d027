"""SQLBackend: the Backend contract on SQLite (stdlib driver) and PostgreSQL (psycopg 3).

The statements themselves live in `_queries.py`, compiled once per dialect; this
module owns connections (a small pool of its own, forgotten across fork), runs the
compiled text on them, maps rows to records, and handles failures: a write whose
acknowledgement was lost (the connection broke after COMMIT) is retried once on a new
connection, and each write's read-back tells its own earlier commit apart from
someone else's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, make_url

from durable._records import NewRun, Run, RunStatus, Step, StepKind, StepStatus
from durable.errors import ConfigurationError, LeaseLost, StorageError

from . import _schema
from ._queries import Queries, Statement

T = TypeVar("T")


_RUN_STATUS = {status.value: status for status in RunStatus}
_STEP_STATUS = {status.value: status for status in StepStatus}
_STEP_KIND = {kind.value: kind for kind in StepKind}


def _run(row: Sequence[Any]) -> Run:
    return Run(
        id=row[0],
        workflow=row[1],
        status=_RUN_STATUS[row[2]],
        input=row[3],
        call_hash=row[4],
        output=row[5],
        error=row[6],
        epoch=row[7],
        lease_owner=row[8],
        lease_until=row[9],
        recoveries=row[10],
        parent_id=row[11],
        created_at=row[12],
        updated_at=row[13],
        finished_at=row[14],
    )


def _step(row: Sequence[Any]) -> Step:
    return Step(
        run_id=row[0],
        position=row[1],
        kind=_STEP_KIND[row[2]],
        name=row[3],
        call_hash=row[4],
        status=_STEP_STATUS[row[5]],
        input=row[6],
        output=row[7],
        error=row[8],
        attempts=row[9],
        started_at=row[10],
        finished_at=row[11],
        epoch=row[12],
    )


def _step_params(step: Step, epoch: int) -> tuple[Any, ...]:
    # The hottest statement: its parameter tuple is built directly (see _queries.RECORD_ORDER).
    return (
        step.run_id,
        step.position,
        step.kind.value,
        step.name,
        step.call_hash,
        step.status.value,
        step.input,
        step.output,
        step.error,
        step.attempts,
        step.started_at,
        step.finished_at,
        epoch,
        step.run_id,
        epoch,
    )


# Connections must not cross a fork: a child that closed an inherited PostgreSQL
# connection would close the parent's session too. Children just forget them.
_LIVE_BACKENDS: weakref.WeakSet[SQLBackend] = weakref.WeakSet()


def _forget_connections_after_fork() -> None:
    for backend in list(_LIVE_BACKENDS):
        backend._forget_connections()


os.register_at_fork(after_in_child=_forget_connections_after_fork)


class SQLBackend:
    """A backend on SQLite (stdlib driver) or PostgreSQL (psycopg 3).

    Args:
        url: ``sqlite:///path/to/file.db`` (optionally ``?synchronous=NORMAL``) or
            ``postgresql://user:password@host:port/database``.
        busy_timeout: seconds a SQLite write waits for the file lock.
    """

    def __init__(self, url: str | URL, *, busy_timeout: float = 30.0) -> None:
        self.url = make_url(url)
        self.masked_url = self.url.render_as_string(hide_password=True)
        backend = self.url.get_backend_name()
        self._idle: list[Any] = []
        self._pool_lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        if backend == "sqlite":
            self._dialect: sa.Dialect = sqlite_dialect.dialect()
            self._connect: Callable[[], Any] = self._sqlite_connector(busy_timeout)
            self._driver_error: tuple[type[BaseException], ...] = (sqlite3.Error,)
        elif backend == "postgresql":
            # Positional %s parameters, like SQLite's ?: hot statements get a plain tuple.
            self._dialect = pg_dialect.psycopg.dialect(paramstyle="format")  # type: ignore[no-untyped-call]
            self._connect = self._postgres_connector()
            import psycopg

            self._driver_error = (psycopg.Error,)
        else:
            raise ConfigurationError(
                f"Unsupported database URL {self.masked_url!r}: durable speaks sqlite:/// and "
                "postgresql://, or memory:// for tests."
            )
        self.dialect_name: str = self._dialect.name
        self._sql = Queries(self._dialect)
        _LIVE_BACKENDS.add(self)
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise

    # -- connections --------------------------------------------------------------

    def _sqlite_connector(self, busy_timeout: float) -> Callable[[], sqlite3.Connection]:
        database = self.url.database
        if not database or database == ":memory:":
            raise ConfigurationError(
                "An in-memory SQLite URL cannot be shared between connections; use "
                "memory:// for the in-memory backend, or give SQLite a file path."
            )
        query = {k: str(v) for k, v in self.url.query.items()}
        synchronous = query.pop("synchronous", "FULL").upper()
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ConfigurationError(
                f"synchronous={synchronous!r} is not supported; use FULL (the default, survives "
                "power loss) or NORMAL (faster, survives process crashes only)."
            )
        if query:
            raise ConfigurationError(f"Unknown SQLite URL options: {sorted(query)}.")
        path = Path(database)

        def connect() -> sqlite3.Connection:
            # isolation_level=None: no implicit BEGIN; every single statement commits
            # on its own, and multi-statement writes say BEGIN IMMEDIATE themselves.
            conn = sqlite3.connect(
                path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={synchronous}")
            return conn

        return connect

    def _postgres_connector(self) -> Callable[[], Any]:
        try:
            import psycopg
        except ImportError:
            raise ConfigurationError(
                "PostgreSQL needs psycopg 3: pip install 'durable[postgres]'."
            ) from None
        conninfo = self.url.set(drivername="postgresql").render_as_string(hide_password=False)

        def connect() -> Any:
            conn = psycopg.connect(conninfo, autocommit=True, application_name="durable")
            # A paused or dead-locked client must not pin row locks or the vacuum horizon.
            conn.execute("SET idle_in_transaction_session_timeout = '60s'")
            return conn

        return connect

    def _checkout(self) -> Any:
        if self._closed:
            raise StorageError(f"The backend for {self.masked_url} is closed.")
        if self._pid != os.getpid():
            self._forget_connections()
        with self._pool_lock:
            if self._idle:
                return self._idle.pop()
        try:
            return self._connect()
        except self._driver_error as error:
            raise StorageError(
                f"Cannot connect to {self.masked_url}: {self._scrub(error)}. Check the URL "
                "and that the database is running and reachable."
            ) from None

    def _checkin(self, conn: Any) -> None:
        with self._pool_lock:
            if not self._closed:
                self._idle.append(conn)
                return
        self._close_quietly(conn)

    def _broken(self, conn: Any) -> bool:
        if self.dialect_name == "sqlite":
            return False
        return bool(conn.closed or conn.broken)

    @staticmethod
    def _close_quietly(conn: Any) -> None:
        with contextlib.suppress(Exception):  # already broken; nothing more to release
            conn.close()

    def _forget_connections(self) -> None:
        with self._pool_lock:
            self._idle = []
        self._pid = os.getpid()

    def _scrub(self, error: BaseException) -> str:
        text = str(error).strip().replace("\n", " ")
        password = self.url.password
        return text.replace(str(password), "***") if password else text

    def _op(self, name: str, body: Callable[[Any, bool], T]) -> T:
        """Run *body(conn, retried)*, retrying once on a broken connection.

        *retried* tells a write that an earlier attempt may have committed unseen.
        """
        for attempt in range(2):
            conn = self._checkout()
            try:
                result = body(conn, attempt > 0)
            except BaseException as error:
                if self._broken(conn):
                    self._close_quietly(conn)
                else:
                    self._checkin(conn)
                if not isinstance(error, self._driver_error):
                    raise
                connection_lost = self.dialect_name == "postgresql" and _is_connection_error(error)
                if connection_lost and attempt == 0:
                    continue
                raise StorageError(
                    f"{name} failed on {self.masked_url}: {self._scrub(error)}"
                ) from None
            self._checkin(conn)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _execute(self, conn: Any, statement: Statement, values: Mapping[str, Any]) -> Any:
        return conn.execute(statement.sql, statement.params(values))

    # -- schema -------------------------------------------------------------------

    def _migrate(self) -> None:
        def body(conn: Any, _retried: bool) -> None:
            if self._schema_version(conn) == _schema.SCHEMA_VERSION:
                return
            with self._transaction(conn):
                if self.dialect_name == "postgresql":
                    # Serialize concurrent first starts; CREATE IF NOT EXISTS alone races.
                    conn.execute("SELECT pg_advisory_xact_lock(727274)")
                version = self._schema_version(conn)
                if version > _schema.SCHEMA_VERSION:
                    raise ConfigurationError(
                        f"The database at {self.masked_url} has durable schema version {version}, "
                        f"newer than this code understands ({_schema.SCHEMA_VERSION}). Upgrade "
                        "durable before using this database."
                    )
                for migrate in _schema.MIGRATIONS[version:]:
                    migrate(self._dialect, conn.execute)
                conn.execute(
                    "DELETE FROM durable_meta WHERE key = 'schema_version'",
                )
                conn.execute(
                    "INSERT INTO durable_meta (key, value) VALUES ('schema_version', "
                    f"'{_schema.SCHEMA_VERSION}')"
                )

        self._op("Creating the schema", body)

    def _schema_version(self, conn: Any) -> int:
        if self.dialect_name == "sqlite":
            exists = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'durable_meta'"
            ).fetchone()
        else:
            exists = conn.execute("SELECT to_regclass('durable_meta')").fetchone()[0]
        if not exists:
            return 0
        row = conn.execute("SELECT value FROM durable_meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    @contextmanager
    def _transaction(self, conn: Any) -> Iterator[None]:
        if self.dialect_name == "postgresql":
            with conn.transaction():
                yield
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- the Backend contract -------------------------------------------------------

    def now(self) -> float:
        """See `Backend.now`."""
        return self._op(
            "Reading the clock",
            lambda conn, _: float(self._execute(conn, self._sql.now, {}).fetchone()[0]),
        )

    def create_run(self, new: NewRun) -> tuple[Run, bool]:
        """See `Backend.create_run`."""
        status = RunStatus.RUNNING if new.owner else RunStatus.QUEUED
        epoch = 1 if new.owner else 0
        values = {
            "id": new.id,
            "workflow": new.workflow,
            "status": status.value,
            "input": new.input,
            "call_hash": new.call_hash,
            "epoch": epoch,
            "owner": new.owner,
            "lease": new.lease if new.owner else None,
            "parent_id": new.parent_id,
        }

        def body(conn: Any, retried: bool) -> tuple[Run, bool]:
            row = self._execute(conn, self._sql.create_run, values).fetchone()
            if row is not None:
                created_at, lease_until = row
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
                )
                return run, True
            existing = self._execute(conn, self._sql.get_run, {"id": new.id}).fetchone()
            if existing is None:  # deleted between the two statements; try again
                return body(conn, retried)
            run = _run(existing)
            # Our own insert whose acknowledgement was lost looks exactly like this.
            ours = (
                retried
                and new.owner is not None
                and run.lease_owner == new.owner
                and run.epoch == 1
                and run.input == new.input
                and run.call_hash == new.call_hash
            )
            return run, ours

        return self._op(f"Creating run {new.id!r}", body)

    def get_run(self, run_id: str) -> Run | None:
        """See `Backend.get_run`."""

        def body(conn: Any, _retried: bool) -> Run | None:
            row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            return None if row is None else _run(row)

        return self._op(f"Reading run {run_id!r}", body)

    def load_history(self, run_id: str) -> Sequence[Step]:
        """See `Backend.load_history`."""
        return self._op(
            f"Loading the history of run {run_id!r}",
            lambda conn, _: [
                _step(row)
                # fetchall: iterating a psycopg cursor row by row costs 3 us a row.
                for row in self._execute(
                    conn, self._sql.load_history, {"run_id": run_id}
                ).fetchall()
            ],
        )

    def record(self, step: Step, epoch: int) -> Step:
        """See `Backend.record`."""
        values = _step_params(step, epoch)
        sql = self._sql.record.sql

        def body(conn: Any, _retried: bool) -> Step:
            if conn.execute(sql, values).rowcount == 1:
                return step if step.epoch == epoch else dataclasses.replace(step, epoch=epoch)
            row = self._execute(
                conn, self._sql.record_conflict, {"run_id": step.run_id, "position": step.position}
            ).fetchone()
            if row is None or row[0] != epoch:
                raise LeaseLost(
                    f"Run {step.run_id!r} is no longer at epoch {epoch}; another owner took it "
                    "over, so this process may not record its steps.",
                    run_id=step.run_id,
                    epoch=epoch,
                )
            if row[1] is None:  # pragma: no cover - the row vanished; write again
                return body(conn, _retried)
            return _step(row[1:])

        return self._op(f"Recording position {step.position} of run {step.run_id!r}", body)

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

        def body(conn: Any, retried: bool) -> bool:
            if self._execute(conn, statement, values).rowcount == 1:
                return True
            if not retried:
                return False
            row = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
            # A lost acknowledgement: our own earlier commit already set this outcome.
            return row is not None and row[7] == epoch and row[2] == status.value

        return self._op(f"Finishing run {run_id!r}", body)

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
                return _run(row)
            if retried:
                current = self._execute(conn, self._sql.get_run, {"id": run_id}).fetchone()
                if current is not None and current[7] == epoch + 1 and current[8] == owner:
                    return _run(current)
            return None

        return self._op(f"Claiming run {run_id!r}", body)

    def recoverable(self, *, host: str) -> Sequence[Run]:
        """See `Backend.recoverable`."""
        prefix = f"{host}:"
        return self._op(
            "Looking for runs to recover",
            lambda conn, _: [
                _run(row)
                for row in self._execute(
                    conn, self._sql.recoverable, {"prefix": prefix, "prefix_len": len(prefix)}
                ).fetchall()
            ],
        )

    def renew_leases(self, owner: str, lease: float) -> int:
        """See `Backend.renew_leases`."""
        return self._op(
            "Renewing leases",
            lambda conn, _: int(
                self._execute(
                    conn, self._sql.renew_leases, {"owner": owner, "lease": lease}
                ).rowcount
            ),
        )

    def release_run(self, run_id: str, epoch: int) -> bool:
        """See `Backend.release_run`."""
        return self._op(
            f"Releasing run {run_id!r}",
            lambda conn, _: bool(
                self._execute(conn, self._sql.release_run, {"id": run_id, "epoch": epoch}).rowcount
                == 1
            ),
        )

    def close(self) -> None:
        """Close every idle connection; connections in use close when returned."""
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            self._close_quietly(conn)


def _is_connection_error(error: BaseException) -> bool:
    import psycopg

    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)
