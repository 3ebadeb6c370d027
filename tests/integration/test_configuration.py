"""Where the library keeps its runs, and how it opens SQLite.

``$DURABLE_DATABASE_URL`` and the ``durable.db`` default are read by the library itself
(the CLI's own default is tested in test_cli_runs.py), so they are checked here in
child processes with an environment and a working directory of their own. The SQLite
settings are read back from connections the backend opened.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import RunStatus
from durable.backends._connections import Session
from durable.backends.sql import SQLBackend
from durable.core.records import NewRun
from durable.errors import ConfigurationError, StorageError

#: The directory this process imports durable from: children import the same code.
SOURCE = Path(durable.__file__).resolve().parents[1]

#: A child that runs one task durably; ``configure`` first calls durable.configure()
#: without a URL, ``lazy`` lets the first execute() create the default engine.
CHILD = """
import sys
import durable

@durable.task
def add(a: int, b: int) -> int:
    return a + b

if sys.argv[1] == "configure":
    durable.configure(lease=7.0)
print(durable.execute(add, 2, 3, id="where"))
"""


def run_child(how: str, cwd: Path, **env: str) -> None:
    """Run CHILD in *cwd* with only PATH, PYTHONPATH and *env* in its environment."""
    environment = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SOURCE), **env}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, how],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5"


def stored_run(path: Path) -> durable.Run:
    """The run the child executed, read from the SQLite file at *path*."""
    assert path.exists(), f"{path} was never created"
    with durable.Engine(f"sqlite:///{path}") as engine:
        run = engine.backend.get_run("where")
    assert run is not None, f"the run is not in {path}"
    return run


@pytest.mark.parametrize("how", ["lazy", "configure"])
def test_the_environment_variable_selects_the_database(tmp_path: Path, how: str) -> None:
    """With $DURABLE_DATABASE_URL set, execute() (with no configure() call, or after
    configure() without a URL) stores its run there, not in ./durable.db."""
    work = tmp_path / "work"
    work.mkdir()
    chosen = tmp_path / "elsewhere" / "x.db"
    chosen.parent.mkdir()

    run_child(how, work, DURABLE_DATABASE_URL=f"sqlite:///{chosen}")

    assert not (work / "durable.db").exists(), "the default file must not be touched"
    run = stored_run(chosen)
    assert run.status is RunStatus.COMPLETED
    assert run.workflow == "__main__.add"
    assert list(work.iterdir()) == [], "nothing is written to the working directory"


@pytest.mark.parametrize("how", ["lazy", "configure"])
def test_the_default_database_is_durable_db_in_the_working_directory(
    tmp_path: Path, how: str
) -> None:
    """Without $DURABLE_DATABASE_URL, runs go to durable.db in the working directory."""
    work = tmp_path / "work"
    work.mkdir()

    run_child(how, work)

    run = stored_run(work / "durable.db")
    assert run.status is RunStatus.COMPLETED
    assert run.workflow == "__main__.add"


def pragmas(session: Session) -> dict[str, Any]:
    """The settings that matter for durability, as this connection has them."""
    return {
        name: session.execute(f"PRAGMA {name}").fetchone()[0]
        for name in ("journal_mode", "synchronous", "busy_timeout")
    }


def connections(backend: SQLBackend, count: int = 2) -> list[dict[str, Any]]:
    """The settings of *count* connections checked out of *backend*'s pool at once (the
    one that created the schema, and new ones)."""
    db = backend._db
    sessions = [db.checkout() for _ in range(count)]
    try:
        return [pragmas(session) for session in sessions]
    finally:
        for session in sessions:
            db.checkin(session)


def test_sqlite_defaults_to_wal_and_synchronous_full(tmp_path: Path) -> None:
    """Every connection an Engine opens on SQLite is in WAL mode with synchronous=FULL
    and a 30 s busy timeout."""
    with durable.Engine(f"sqlite:///{tmp_path / 'db.sqlite'}") as engine:
        assert isinstance(engine.backend, SQLBackend)
        settings = connections(engine.backend)
    assert settings == [{"journal_mode": "wal", "synchronous": 2, "busy_timeout": 30_000}] * 2


@pytest.mark.parametrize(
    ("option", "level"), [("NORMAL", 1), ("normal", 1), ("FULL", 2), ("EXTRA", 3)]
)
def test_synchronous_comes_from_the_url(tmp_path: Path, option: str, level: int) -> None:
    """?synchronous=... in the URL sets the level on every connection (case-insensitive)."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}?synchronous={option}"
    with durable.Engine(url) as engine:
        assert isinstance(engine.backend, SQLBackend)
        settings = connections(engine.backend)
    assert [s["synchronous"] for s in settings] == [level, level]
    assert [s["journal_mode"] for s in settings] == ["wal", "wal"]


def test_an_unknown_synchronous_level_is_refused(tmp_path: Path) -> None:
    """synchronous=OFF is a ConfigurationError that names the levels to use, and no file
    is created."""
    path = tmp_path / "db.sqlite"
    with pytest.raises(ConfigurationError) as refused:
        durable.Engine(f"sqlite:///{path}?synchronous=OFF")
    message = str(refused.value)
    assert "'OFF'" in message
    assert "FULL" in message and "NORMAL" in message
    assert not path.exists()


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[str, sqlite3.Connection]]:
    """A SQLite file with the schema, and another connection holding its write lock."""
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    SQLBackend(url).close()  # create the schema while nobody holds the lock
    holder = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield url, holder
    finally:
        holder.close()


def new_run(run_id: str) -> NewRun:
    return NewRun(id=run_id, workflow="w", input=b"jnull", call_hash="v1:x", owner=None, lease=5)


def test_the_busy_timeout_is_set_and_waited_for(locked: tuple[str, sqlite3.Connection]) -> None:
    """busy_timeout=0.4 is PRAGMA busy_timeout 400 on the backend's connections; a write
    meeting another writer's lock waits that long before it fails, and succeeds once the
    lock is gone."""
    url, holder = locked
    backend = SQLBackend(url, busy_timeout=0.4)
    try:
        assert [s["busy_timeout"] for s in connections(backend)] == [400, 400]
        start = time.monotonic()
        with pytest.raises(StorageError, match="locked"):
            backend.create_run(new_run("blocked"))
        waited = time.monotonic() - start
        assert waited >= 0.35, f"the write gave up after {waited:.3f} s, not the busy timeout"

        holder.execute("ROLLBACK")
        _, created = backend.create_run(new_run("after"))
        assert created
    finally:
        backend.close()
