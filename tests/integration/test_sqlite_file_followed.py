"""A SQLite backend follows its path when the file under it is replaced or deleted.

Pooled connections hold the file they opened (its inode), not its path: after a backup
is restored over it (a rename) or the file is deleted and made again, they would serve
the old file for ever, and runs dispatched to the new one would never be claimed. The
backend notices on its next use (at most once a second, one ``stat``), says so in a
warning, and opens the path again. Workers under fire: tests/e2e/test_sqlite_file_replaced.py.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from durable.backends import _file_watch
from durable.backends.sql import SQLBackend
from durable.core.records import NewRun, RunStatus

OWNER = "here@boot.1:1:1:test"


@pytest.fixture(autouse=True)
def check_at_every_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Look at the path on every use, not at most once a second."""
    monkeypatch.setattr(_file_watch, "CHECK_EVERY", 0.0)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "durable.db"


@pytest.fixture
def backend(path: Path) -> Iterator[SQLBackend]:
    """The backend that stays open while the file changes under it (a worker's)."""
    backend = SQLBackend(f"sqlite:///{path}")
    try:
        yield backend
    finally:
        backend.close()


def queued(run_id: str) -> NewRun:
    return NewRun(id=run_id, workflow="app.flow", input=b"j[]", call_hash="h", owner=None, lease=30)


def dispatch(path: Path, run_id: str) -> None:
    """Queue a run as another process would: a fresh backend on the path as it is now."""
    other = SQLBackend(f"sqlite:///{path}")
    try:
        other.create_run(queued(run_id))
    finally:
        other.close()


def remove(path: Path) -> None:
    """Delete the database file with its -wal and -shm files."""
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)


def claim(backend: SQLBackend) -> list[str]:
    runs = backend.claim_next(
        owner=OWNER, queue="default", workflows=["app.flow"], limit=10, lease=30
    )
    return [run.id for run in runs]


def test_a_restored_backup_is_served(
    backend: SQLBackend, path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A copy renamed over the file: what was written after the copy is gone, and runs
    dispatched to the restored file are claimed."""
    backend.create_run(queued("before"))
    copy = tmp_path / "backup.db"
    with sqlite3.connect(path) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    source.close()
    target.close()
    backend.create_run(queued("lost"))
    inode = path.stat().st_ino
    remove(path)
    os.replace(copy, path)
    dispatch(path, "after")

    with caplog.at_level(logging.WARNING, logger="durable"):
        assert backend.get_run("lost") is None, "the backend reads the restored file"
    assert sorted(claim(backend)) == ["after", "before"]
    warning = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(path) in warning and "replaced" in warning, warning
    assert f"inode {inode} -> {path.stat().st_ino}" in warning, warning


def test_a_file_deleted_and_made_again_is_served(
    backend: SQLBackend, path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleted, then created again by the next dispatch: its runs are claimed."""
    backend.create_run(queued("old"))
    remove(path)
    dispatch(path, "new")
    with caplog.at_level(logging.WARNING, logger="durable"):
        assert claim(backend) == ["new"]
    assert backend.get_run("old") is None
    assert any(str(path) in r.getMessage() for r in caplog.records), caplog.text


def test_a_deleted_file_is_made_again_with_its_tables(
    backend: SQLBackend, path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Deleted and nobody made it again: the backend creates it, schema included, and
    says so; other processes then find its runs there."""
    backend.create_run(queued("old"))
    remove(path)
    with caplog.at_level(logging.WARNING, logger="durable"):
        backend.create_run(queued("new"))
    assert path.exists()
    warning = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert str(path) in warning and "deleted" in warning, warning
    other = SQLBackend(f"sqlite:///{path}")
    try:
        found = other.get_run("new")
        assert found is not None and found.status is RunStatus.QUEUED
        assert other.get_run("old") is None
    finally:
        other.close()


def test_a_connection_in_use_during_the_switch_is_not_pooled_again(
    backend: SQLBackend, path: Path
) -> None:
    """A session checked out before the file was replaced is closed when it comes
    back, not handed out again on the old file."""
    held = backend._db.checkout()
    remove(path)
    dispatch(path, "new")
    assert backend.get_run("new") is not None  # notices and opens the new file
    backend._db.checkin(held)
    for _ in range(3):
        assert backend.get_run("new") is not None


def test_an_unchanged_file_keeps_its_connections(backend: SQLBackend) -> None:
    """Nothing happens while the path names the same file."""
    backend.create_run(queued("a"))
    pooled = list(backend._db._idle)
    assert pooled
    assert backend.get_run("a") is not None
    assert backend._db._idle == pooled
