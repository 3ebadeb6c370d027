"""Connections to one database: opened by the driver, pooled, never shared across fork.

SQLAlchemy's pool resets every connection with a rollback when it is returned, an
extra round trip per statement; durable's statements are single autocommitted writes,
so this small pool just keeps idle sessions in a list. A session is a connection and
the one cursor its statements run on: on PostgreSQL a psycopg RawCursor, reused,
which takes the compiled ``$1`` placeholders as they are (a new cursor per statement,
and rewriting ``%s`` placeholders, cost about 20 us of client CPU each).

A forked child forgets the parent's sessions instead of closing them: closing an
inherited PostgreSQL connection would end the parent's session too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from durable.core import faults as _faults
from durable.errors import ConfigurationError, InvalidValue, StorageError

from ._file_watch import FileWatch
from ._refusals import bad_input, refusal
from ._relaxed import RelaxedCommits

T = TypeVar("T")
log = logging.getLogger("durable")

_SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")


def sqlite_synchronous(options: dict[str, str]) -> str:
    """The ``synchronous`` level a SQLite URL's *options* ask for (FULL by default)."""
    synchronous = options.get("synchronous", "FULL").upper()
    if synchronous not in _SYNCHRONOUS:
        raise ConfigurationError(
            f"synchronous={synchronous!r} is not supported; use FULL (the default, survives "
            "power loss), EXTRA (also syncs the directory), or NORMAL (faster, survives "
            "process crashes only)."
        )
    return synchronous


def sqlite_opener(
    database: str | None, options: dict[str, str], *, busy_timeout: float
) -> Callable[[], sqlite3.Connection]:
    """A function that opens a configured connection to a SQLite file."""
    if not database or database == ":memory:":
        raise ConfigurationError(
            "An in-memory SQLite URL cannot be shared between connections; use "
            "memory:// for the in-memory backend, or give SQLite a file path."
        )
    synchronous = sqlite_synchronous(options)
    unknown = sorted(set(options) - {"synchronous"})
    if unknown:
        raise ConfigurationError(f"Unknown SQLite URL options: {unknown}.")
    path = Path(database)

    def connect() -> sqlite3.Connection:
        # isolation_level=None: no implicit BEGIN; every single statement commits on
        # its own, and multi-statement writes say BEGIN IMMEDIATE themselves.
        conn = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={synchronous}")
        return conn

    return connect


class Session:
    """An open connection and the cursor statements run on.

    ``execute(sql, params)`` returns something with ``fetchone``, ``fetchall``,
    ``rowcount`` and ``description``, valid until the next ``execute`` on the session.
    """

    __slots__ = ("conn", "execute", "generation")

    def __init__(self, conn: Any, cursor: Any = None, generation: int = 0) -> None:
        self.conn = conn
        self.execute: Callable[..., Any] = (cursor or conn).execute
        #: which opening of the database it belongs to (see `Connections.follow`).
        self.generation = generation


#: Seconds a PostgreSQL connection attempt may take, unless the URL says otherwise
#: (``?connect_timeout=N``). Without one, a server that drops packets instead of
#: refusing them would hang a connect for the operating system's TCP timeout (minutes).
CONNECT_TIMEOUT = 10


def postgres_opener(conninfo: str) -> Callable[[], Any]:
    """A function that opens an autocommit psycopg connection."""
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:
        raise ConfigurationError(
            "PostgreSQL needs psycopg 3: pip install 'durable[postgres]'."
        ) from None
    if "connect_timeout" not in conninfo_to_dict(conninfo):
        conninfo = make_conninfo(conninfo, connect_timeout=CONNECT_TIMEOUT)

    def connect() -> Any:
        conn = psycopg.connect(conninfo, autocommit=True, application_name="durable")
        # A paused or dead-locked client must not pin row locks or the vacuum horizon.
        conn.execute("SET idle_in_transaction_session_timeout = '60s'")
        return conn

    return connect


def _connection_lost(error: BaseException) -> bool:
    import psycopg

    return isinstance(error, psycopg.OperationalError | psycopg.InterfaceError)


# SQLite's primary result codes for trouble with the file rather than the statement.
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 8, 10, 13, 14

#: A connection that failed so stays read-only, or lost its file: open a new one.
_REOPEN = frozenset({_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_CANTOPEN})

_ADVICE = {
    _SQLITE_FULL: (
        "The disk holding the database is full: free some space. The failed write was "
        "rolled back and the database is intact; workers retry and carry on once there "
        "is room."
    ),
    _SQLITE_READONLY: (
        "The database is read-only for this process: make the file, its -wal and -shm "
        "files and its directory writable by this user (or remount the file system "
        "read-write). Workers retry and carry on once it is writable."
    ),
    _SQLITE_CANTOPEN: (
        "SQLite cannot open the file: check that its directory exists and that this user "
        "may create files in it (SQLite keeps -wal and -shm files beside the database)."
    ),
    _SQLITE_IOERR: (
        "The disk reported an I/O error: check free space and the system log. Workers "
        "retry; the write in progress was rolled back."
    ),
}


def _sqlite_code(error: BaseException) -> int | None:
    """SQLite's primary result code of *error*, or None for other errors."""
    code = getattr(error, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(error, sqlite3.Error) and isinstance(code, int) else None


def _advice(error: BaseException) -> str:
    """What to do about a SQLite failure of the disk or file (empty for other errors)."""
    code = _sqlite_code(error)
    return _ADVICE.get(code, "") if code is not None else ""


_LIVE: weakref.WeakSet[Connections] = weakref.WeakSet()


def _forget_after_fork() -> None:
    for connections in list(_LIVE):
        connections.forget()


os.register_at_fork(after_in_child=_forget_after_fork)


class Connections:
    """A pool of connections to one database, and the translation of its errors.

    Args:
        kind: ``"sqlite"`` or ``"postgresql"``.
        open_: opens one new connection.
        masked_url: the URL with its password hidden, for messages.
        password: scrubbed from any driver message that might echo it.
        relax: lets SQLite commit a transaction unsynced (see `transaction`).
    """

    def __init__(
        self,
        kind: str,
        open_: Callable[[], Any],
        *,
        masked_url: str,
        password: str | None,
        relax: RelaxedCommits | None = None,
    ) -> None:
        self.kind = kind
        self.relax = relax
        self.masked_url = masked_url
        self._open = open_
        self._password = password
        self._idle: list[Session] = []
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        self._watch: FileWatch | None = None
        self._reopened: Callable[[], None] = lambda: None
        self._generation = 0
        if kind == "sqlite":
            self.driver_error: tuple[type[BaseException], ...] = (sqlite3.Error,)
            self.lost_error: type[BaseException] = sqlite3.OperationalError
            data_error: type[BaseException] = sqlite3.DataError
        else:
            import psycopg

            self.driver_error = (psycopg.Error,)
            self.lost_error = psycopg.OperationalError
            data_error = psycopg.DataError
        #: what the driver raises for a value it or the database refuses (bad input).
        self.data_error = (data_error, UnicodeEncodeError, OverflowError)
        _LIVE.add(self)

    def open(self) -> Session:
        """A new session, outside the pool (the caller closes ``session.conn``)."""
        generation = self._generation  # read first: a file replaced meanwhile is newer
        try:
            conn = self._open()
            if self.kind == "postgresql":
                import psycopg

                return Session(conn, psycopg.RawCursor(conn))
            return Session(conn, generation=generation)
        except self.driver_error as error:
            advice = _advice(error) or (
                "Check the URL and that the database is running and reachable."
            )
            raise StorageError(
                f"Cannot connect to {self.masked_url}: {self.scrub(error)}. {advice}"
            ) from None

    def checkout(self) -> Session:
        """An idle session, or a new one."""
        if self._closed:
            raise StorageError(f"The backend for {self.masked_url} is closed.")
        if self._pid != os.getpid():
            self.forget()
        if self._watch is not None:
            self._follow_file(self._watch)
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return self.open()

    def checkin(self, session: Session) -> None:
        """Return a healthy session to the pool (or close it, once closed or once its
        file was replaced)."""
        with self._lock:
            if not self._closed and session.generation == self._generation:
                self._idle.append(session)
                return
        close_quietly(session.conn)

    def follow(self, watch: FileWatch, reopened: Callable[[], None]) -> None:
        """Follow a SQLite file's path (see `_file_watch.py`): when it names another file,
        drop every connection and call *reopened* (which creates the schema if needed)."""
        self._reopened = reopened
        self._watch = watch
        watch.opened()

    def _follow_file(self, watch: FileWatch) -> None:
        news = watch.moved()
        if news is None:
            return
        log.warning("%s", news)
        with self._lock:
            self._generation += 1  # sessions in use now are closed when they come back
            idle, self._idle = self._idle, []
        for session in idle:
            close_quietly(session.conn)
        try:
            self._reopened()
        except BaseException:
            watch.retry()
            raise
        watch.opened()

    def broken(self, session: Session) -> bool:
        """Whether *session* can no longer be used (PostgreSQL only; files do not break)."""
        return self.kind != "sqlite" and bool(session.conn.closed or session.conn.broken)

    def _drop_idle(self) -> None:
        """Close every idle session (after one of them turned out dead)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for session in idle:
            close_quietly(session.conn)

    def forget(self) -> None:
        """Drop every pooled connection without closing it (after fork)."""
        with self._lock:
            self._idle = []
        self._pid = os.getpid()
        if self.relax is not None:
            self.relax.forget()

    def scrub(self, error: BaseException) -> str:
        """A driver error as one line, without the password."""
        text = str(error).strip().replace("\n", " ")
        return text.replace(self._password, "***") if self._password else text

    def run(self, name: str, body: Callable[[Session, bool], T]) -> T:
        """Run *body(session, retried)* on a pooled session, retrying once if it broke.

        *retried* tells a write that an earlier attempt may have committed unseen, so it
        must read back before concluding. A value the database or its driver refuses
        becomes InvalidValue (bad input: retrying cannot help, see `_refusals`); every
        other driver error becomes StorageError (the database failed or is unreachable).
        """
        for attempt in range(2):
            session = self.checkout()
            try:
                result = body(session, attempt > 0)
                _faults.committed(name, self.lost_error)
            except BaseException as error:
                lost = self.broken(session)
                if lost or _sqlite_code(error) in _REOPEN:
                    close_quietly(session.conn)
                else:
                    self.checkin(session)
                if lost:
                    # The server went away (a restart): the idle sessions died with
                    # this one, and the retry must not pick up one of them.
                    self._drop_idle()
                if bad_input(error, self.data_error):
                    raise InvalidValue(refusal(name, self.masked_url, error, self.scrub)) from None
                if not isinstance(error, self.driver_error):
                    raise
                if self.kind == "postgresql" and _connection_lost(error) and attempt == 0:
                    continue
                advice = _advice(error)
                raise StorageError(
                    f"{name} failed on {self.masked_url}: {self.scrub(error)}"
                    + (f". {advice}" if advice else "")
                ) from None
            self.checkin(session)
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    @contextlib.contextmanager
    def transaction(self, session: Session, *, synced: bool = True) -> Iterator[None]:
        """Several statements as one write transaction (BEGIN IMMEDIATE on SQLite).

        ``synced=False`` commits without an fsync of its own where the backend allows
        it (SQLite at FULL or EXTRA, see `_relaxed.py`): only for writes that replay
        can reproduce.
        """
        if self.kind == "postgresql":
            with session.conn.transaction():
                yield
            return
        if synced or self.relax is None:
            with self._sqlite_transaction(session):
                yield
            return
        with self.relax.relaxed(session.execute), self._sqlite_transaction(session):
            yield

    @contextlib.contextmanager
    def _sqlite_transaction(self, session: Session) -> Iterator[None]:
        session.execute("BEGIN IMMEDIATE")
        try:
            yield
            session.execute("COMMIT")
        except BaseException:
            # SQLite may have rolled back already (it does on a full disk), and a failed
            # COMMIT may leave the transaction open: roll back only what is still open,
            # so the caller sees the original error and the session holds no lock.
            if session.conn.in_transaction:
                session.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close idle connections; connections in use close when they come back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for session in idle:
            close_quietly(session.conn)
        if self.relax is not None:
            self.relax.close()


def close_quietly(conn: Any) -> None:
    """Close a connection that may already be broken."""
    with contextlib.suppress(Exception):
        conn.close()
