"""A run inserted in the caller's own transaction (the outbox pattern).

`SQLOutbox.create_run_in` runs durable's insert of a queued run on the caller's
SQLAlchemy ``Connection`` (or the one an ORM ``Session`` holds), inside the transaction
the caller has open: the run is committed with the caller's rows or rolled back with
them. The statement is the one `create_run` compiles (`queued_run_clause`), compiled
again by SQLAlchemy for the caller's driver; on PostgreSQL its ``pg_notify`` (on durable's
channel, named: the caller's schema may differ) is part of
the caller's transaction, so workers hear of the run when it commits, not before;
what is to happen once the run exists (a metric counting it) waits for that commit too
(`_commit_hooks`).

"The same database" is asked of the two connections, not read from URLs (a host has
many names, a file many paths): SQLite, the same file (``PRAGMA database_list``, then
`os.path.samefile`); PostgreSQL, the same server (its ``pg_postmaster_start_time()``)
and database (``current_database()``). On PostgreSQL the insert names durable's schema
(the one its tables resolve to on durable's own connections), whatever the caller's
``search_path`` is.
"""

from __future__ import annotations

import functools
import os
import weakref
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from durable.backends import _rows
from durable.backends._schema import runs
from durable.backends._statements.base import CHANNEL_SQL
from durable.core.attributes import Attributes
from durable.core.records import NewRun, Run
from durable.errors import ConfigurationError, StorageError

from ._base import SQLBase
from ._commit_hooks import when_committed

#: Where durable's tables are, and the channel its workers listen on, asked of durable's
#: connection (PostgreSQL).
_PG_HOME = sa.text(
    f"SELECT current_database(), pg_postmaster_start_time()::text, n.nspname, {CHANNEL_SQL}"
    " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE c.oid = to_regclass('durable_runs')"
)
#: Which server and database a caller's connection is on (PostgreSQL).
_PG_PLACE = sa.text("SELECT current_database(), pg_postmaster_start_time()::text")
#: The files of a SQLite connection's databases: (seq, name, file).
_SQLITE_FILES = sa.text("PRAGMA database_list")

_NOT_A_CONNECTION = (
    "connection= takes a SQLAlchemy Connection or ORM Session with a transaction open, "
    "not {kind}. With asyncio, pass the synchronous connection from inside "
    "`await conn.run_sync(...)` (or `await session.run_sync(...)`)."
)


class SQLOutbox(SQLBase):
    """`RunStore.create_run_in` for `SQLBackend`."""

    dialect_name: str
    masked_url: str
    url: Any
    #: Caller engines already found on this database: asked once each.
    _same_engines: weakref.WeakSet[Any]
    #: from `SQLAttributes`: the parameters that set a run's attributes.
    _attribute_values: Callable[[str, Attributes], dict[str, Any]]
    #: durable's (database, server start, schema, channel) on PostgreSQL, read once.
    _pg_home: tuple[str, str, str, str] | None = None
    #: the insert, notifying durable's channel by name (see `_queued_run_clause`).
    _outbox_clause: Any = None

    def create_run_in(
        self,
        new: NewRun,
        transaction: object,
        *,
        committed: Callable[[Run], None] | None = None,
    ) -> tuple[Run, bool]:
        """See `RunStore.create_run_in`."""
        if new.owner is not None or new.key_limit is not None or new.start_at is not None:
            raise ValueError("create_run_in makes queued runs: no owner, key limit or start_at.")
        conn = _open_connection(transaction)
        options = self._check_same_database(conn)
        values, _, _ = _rows.new_run_values(new)
        try:
            row = conn.execute(self._queued_run_clause(), values, execution_options=options)
            first = row.fetchone()
            if first is not None:
                if new.attributes:
                    attributes = self._attribute_values(new.id, new.attributes)
                    clause = self._sql.set_attributes_clause
                    conn.execute(clause, attributes, execution_options=options)
                run = _rows.created_run(new, first[1], None, first[2])
                if committed is not None:
                    when_committed(conn, functools.partial(committed, run))
                return run, True
            query = sa.select(*runs.c).where(runs.c.id == new.id)
            existing = conn.execute(query, execution_options=options).fetchone()
        except sa.exc.SQLAlchemyError as error:
            raise StorageError(
                f"Inserting run {new.id!r} in your transaction failed: {error}. Your "
                "transaction may need a rollback; nothing of durable's was committed."
            ) from error
        if existing is None:  # deleted between the two statements, in another transaction
            raise StorageError(f"Run {new.id!r} vanished while it was created; try again.")
        return _rows.run(existing), False

    def _check_same_database(self, conn: sa.Connection) -> dict[str, Any]:
        """The execution options that aim durable's statements at its tables through
        *conn*, once *conn* is known to be on this backend's database."""
        if self.dialect_name == "postgresql":
            home = self._home()
            options = {"schema_translate_map": {None: home[2]}}
        else:
            options = {}
        if conn.engine in self._same_engines:
            return options
        theirs = conn.dialect.name
        if theirs != self.dialect_name:
            raise ConfigurationError(self._elsewhere(f"a {theirs} database"))
        if self.dialect_name == "postgresql":
            place = tuple(conn.execute(_PG_PLACE).one())
            if place != home[:2]:
                where = f"database {place[0]!r} of a server started at {place[1]}"
                ours = f"database {home[0]!r} of the server started at {home[1]}"
                raise ConfigurationError(self._elsewhere(where, ours))
        else:
            files = {row[1]: row[2] for row in conn.execute(_SQLITE_FILES)}
            path = files.get("main") or ""
            if not path or not _same_file(path, str(self.url.database)):
                raise ConfigurationError(self._elsewhere(f"the SQLite file {path or ':memory:'!r}"))
        self._same_engines.add(conn.engine)
        return options

    def _queued_run_clause(self) -> Any:
        """The insert of a queued run, notifying durable's channel by its name: on the
        caller's connection the current schema may not be durable's."""
        if self._outbox_clause is None:
            channel = self._home()[3] if self.dialect_name == "postgresql" else None
            self._outbox_clause = self._sql.queued_run_clause(channel=channel)
        return self._outbox_clause

    def _home(self) -> tuple[str, str, str, str]:
        if self._pg_home is None:
            sql = str(_PG_HOME.compile())

            def body(session: Any, _retried: bool) -> tuple[str, str, str, str]:
                row = session.execute(sql, ()).fetchone()
                return (row[0], row[1], row[2], row[3])

            self._pg_home = self._db.run("Finding durable's tables", body)
        return self._pg_home

    def _elsewhere(self, theirs: str, ours: str | None = None) -> str:
        return (
            f"connection= is on {theirs}, and durable's runs are in {ours or self.masked_url}: "
            "a run can join only a transaction on durable's own database (for SQLite the "
            "same file, for PostgreSQL the same server and database; the schema is "
            "durable's whatever the connection's search_path). Use a connection to "
            "that database, or dispatch without connection=."
        )


def _open_connection(transaction: object) -> sa.Connection:
    """The Connection of *transaction* (a Connection, or a Session's), whose
    transaction is open; refused with a ValueError saying how to open one."""
    if isinstance(transaction, sa.Connection):
        if transaction.closed or transaction.invalidated:
            raise ValueError(_closed("the Connection is closed"))
        if not transaction.in_transaction() or not transaction.get_transaction().is_active:  # type: ignore[union-attr]
            raise ValueError(_closed("the Connection has no transaction open"))
        return transaction
    from sqlalchemy import orm

    if isinstance(transaction, orm.scoped_session):
        transaction = transaction()  # the session of this scope (thread)
    if isinstance(transaction, orm.Session):
        if not transaction.in_transaction():
            raise ValueError(_closed("the Session has no transaction open"))
        try:
            return transaction.connection()
        except sa.exc.SQLAlchemyError as error:  # a failed flush: it must roll back first
            raise ValueError(_closed(f"the Session cannot go on ({error})")) from None
    raise TypeError(_NOT_A_CONNECTION.format(kind=type(transaction).__name__))


def _closed(what: str) -> str:
    return (
        f"connection= needs a transaction that is open, and {what}: a run inserted "
        "now would not be part of your commit. Dispatch inside `with conn.begin():` "
        "(or `with Session(engine) as s, s.begin():`), before you commit."
    )


def _same_file(theirs: str, ours: str) -> bool:
    try:
        return os.path.samefile(theirs, ours)
    except OSError:
        return False
