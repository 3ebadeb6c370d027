"""SQLBackend: the Backend contract on SQLite (stdlib driver) and PostgreSQL (psycopg 3).

The class is assembled from one mixin per role of the storage seam: runs and leases
(_runs.py, and their writes of many rows at once in _many.py), the hand-over of
continue-as-new (_continuing.py), histories
(_history.py), waits (_waits.py), cancelling and pausing (_control.py), schedules
(_schedules.py), queue limits (_queues.py), streams (_streams.py), tallies
(_tallies.py) and the operator's side (_inspection.py), on
the shared plumbing of _base.py. This module opens the database:
it reads the URL, picks the dialect, compiles the statements (`_statements`, once per
dialect), sets up the connections (`_connections.py`) and group commit (`_group.py`),
and migrates the schema. At run time the mixins send the compiled statements straight
to the driver, map rows to records, tell their own lost-acknowledgement commits apart
from other writers', and notify waiters in this process.
"""

from __future__ import annotations

import json
import threading
import weakref
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import URL, make_url

from durable.backends import _migrations
from durable.backends._connections import (
    Connections,
    postgres_opener,
    sqlite_opener,
    sqlite_synchronous,
)
from durable.backends._file_watch import FileWatch
from durable.backends._group import GroupCommit, in_one_transaction
from durable.backends._hub import Hub
from durable.backends._relaxed import RelaxedCommits
from durable.backends._statements import compiled
from durable.errors import ConfigurationError

from ._attributes import SQLAttributes
from ._continuing import SQLContinuing
from ._control import SQLControl
from ._history import SQLHistory
from ._inspection import SQLInspection
from ._many import SQLMany
from ._outbox import SQLOutbox
from ._queues import SQLQueues
from ._runs import SQLRuns
from ._schedules import SQLSchedules
from ._streams import SQLStreams
from ._tallies import SQLTallies
from ._waits import SQLWaits

__all__ = ["SQLBackend"]


class SQLBackend(
    SQLRuns,
    SQLOutbox,
    SQLContinuing,
    SQLMany,
    SQLHistory,
    SQLWaits,
    SQLInspection,
    SQLControl,
    SQLSchedules,
    SQLQueues,
    SQLAttributes,
    SQLStreams,
    SQLTallies,
):
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
        self._sql = compiled(self._dialect)
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
        self._same_engines = weakref.WeakSet()
        self._listener = None
        self._purged_to = None
        self._listener_lock = threading.Lock()
        # SQLite takes lists as JSON arrays (json_each); psycopg adapts Python lists.
        self._names = json.dumps if kind == "sqlite" else list
        self._limited, self._unlimited_until, self._with_rows = set(), {}, set()
        self._rated: set[str] = set()
        try:
            self._migrate()
        except BaseException:
            self.close()
            raise
        if kind == "sqlite":  # a file replaced or deleted under us: see _file_watch.py
            self._db.follow(FileWatch(Path(str(self.url.database))), self._migrate)

    def _migrate(self) -> None:
        self._db.run(
            "Creating the schema",
            lambda conn, _: _migrations.migrate(conn, self._db, self._dialect),
        )

    def close(self) -> None:
        """Release connections and threads: stop listening and close idle connections;
        connections in use close when they come back."""
        with self._listener_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        self._db.close()
        self._hub.notify_all()
