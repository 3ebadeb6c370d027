"""SQLite's disk and file failures, as durable reports them and recovers from them.

The chaos tests (tests/chaos/test_sqlite_disk.py) fill a real disk; here the same
errors come from per-connection limits: ``max_page_count`` for a full disk and
``query_only`` for a read-only file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.backends._connections import Session
from durable.backends.sql import SQLBackend
from durable.errors import StorageError

INSERT = "INSERT INTO durable_meta (key, value) VALUES (?, hex(randomblob(3000)))"


@pytest.fixture
def backend(tmp_path: Path) -> Iterator[SQLBackend]:
    """A SQLite backend on a fresh file."""
    backend = SQLBackend(f"sqlite:///{tmp_path / 'db.sqlite'}")
    try:
        yield backend
    finally:
        backend.close()


def test_a_full_disk_in_a_transaction_says_so(backend: SQLBackend) -> None:
    """SQLite rolls back a transaction itself when the disk fills; the error is the full
    disk, with what to do, not a failed ROLLBACK, and the session can write again."""
    db = backend._db

    def fill(session: Session, _retried: bool) -> None:
        pages = session.execute("PRAGMA page_count").fetchone()[0]
        session.execute(f"PRAGMA max_page_count = {pages + 2}")
        with db.transaction(session):
            for i in range(20):
                session.execute(INSERT, (f"filler-{i}",))

    with pytest.raises(StorageError, match="disk holding the database is full: free some"):
        db.run("Filling the disk", fill)

    def write(session: Session, _retried: bool) -> int:
        session.execute("PRAGMA max_page_count = 1073741823")  # the space came back
        with db.transaction(session):
            session.execute(INSERT, ("after",))
        return int(session.execute("SELECT count(*) FROM durable_meta").fetchone()[0])

    assert db.run("Writing", write) == 2  # the schema version, and this row


def test_a_session_that_found_the_file_read_only_is_not_reused(backend: SQLBackend) -> None:
    """A connection opened while the file was read-only stays read-only: once it fails
    so, it is closed, and the next write opens a fresh one."""
    db = backend._db

    def write_read_only(session: Session, _retried: bool) -> None:
        session.execute("PRAGMA query_only = 1")
        session.execute(INSERT, ("refused",))

    with pytest.raises(StorageError, match="read-only for this process: make the file"):
        db.run("Writing", write_read_only)
    db.run("Writing", lambda session, _: session.execute(INSERT, ("accepted",)))
