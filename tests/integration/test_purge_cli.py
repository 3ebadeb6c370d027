"""`durable purge` as a user runs it: a subprocess against SQLite and PostgreSQL files.

Runs are made old by moving their timestamps two days back in the database, as if
they had been created and finished then: waiting two days is not an option.
"""

from __future__ import annotations

import os
import pty
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, dispatch, send, task, wait, workflow

TWO_DAYS = 2 * 86400
BOTH = pytest.mark.parametrize(
    "url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
SQLITE = pytest.mark.parametrize("url", ["sqlite"], indirect=True)


@task
def double(x: int) -> int:
    return 2 * x


@workflow
def twice(x: int) -> int:
    return double(x) + double(x)


@workflow
def noisy(me: str) -> int:
    send(me, "note", 1)  # an event in its own inbox, never consumed
    return double(1)


@workflow
def parent_then_wait() -> int:
    value = twice(1)  # a child run, finished before the parent waits
    wait("go")
    return value


def sql(url: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    """Run one statement on the test's database, outside durable."""
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            return conn.execute(statement.replace("%s", "?"), params).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def age(url: str, ids: Iterable[str]) -> None:
    """Move the runs' times two days back: created, updated and finished then."""
    for run_id in ids:
        sql(
            url,
            "UPDATE durable_runs SET created_at = created_at - %s, updated_at = updated_at - %s, "
            "finished_at = finished_at - %s WHERE id = %s",
            TWO_DAYS,
            TWO_DAYS,
            TWO_DAYS,
            run_id,
        )


def rows_of(url: str, run_id: str) -> tuple[int, int, int]:
    """(run rows, history rows, event rows) of one run."""
    return (
        sql(url, "SELECT count(*) FROM durable_runs WHERE id = %s", run_id)[0][0],
        sql(url, "SELECT count(*) FROM durable_history WHERE run_id = %s", run_id)[0][0],
        sql(url, "SELECT count(*) FROM durable_events WHERE run_id = %s", run_id)[0][0],
    )


def purge_cli(
    *args: str, cwd: Path, stdin: Any = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durable", "purge", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        stdin=stdin,
        check=False,
    )


def _settle(engine: durable.Engine, done: Any) -> None:
    """Run a worker in this process until *done()*."""
    with Worker(engine, concurrency=4, poll=0.05):
        deadline = time.monotonic() + 30
        while not done():
            assert time.monotonic() < deadline, "the worker did not get the runs there"
            time.sleep(0.02)


def _status(engine: durable.Engine, run_id: str) -> RunStatus | None:
    run = engine.backend.get_run(run_id)
    return None if run is None else run.status


def _old_finished(engine: durable.Engine, url: str, count: int) -> list[str]:
    ids = [f"old-{i}" for i in range(count)]
    for i, run_id in enumerate(ids):
        dispatch(twice, i, id=run_id)
    _settle(engine, lambda: all(_status(engine, r) is RunStatus.COMPLETED for r in ids))
    age(url, ids)
    return ids


@BOTH
def test_purge_deletes_old_finished_runs_and_nothing_else(
    engine: durable.Engine, url: str, tmp_path: Path
) -> None:
    """Old finished runs go with their history and events; recent runs, unfinished runs
    and the finished child of a live parent stay, every row of theirs intact."""
    old = [f"old-{i}" for i in range(3)]
    for i, run_id in enumerate(old):
        dispatch(twice, i, id=run_id)
    dispatch(noisy, "old-noisy", id="old-noisy")
    dispatch(twice, 7, id="recent")
    dispatch(parent_then_wait, id="parent")
    finished = [*old, "old-noisy", "recent", "parent/0"]
    _settle(
        engine,
        lambda: (
            all(_status(engine, r) is RunStatus.COMPLETED for r in finished)
            and _status(engine, "parent") is RunStatus.WAITING
        ),
    )
    dispatch(twice, 9, id="queued")  # no worker any more: it stays queued
    age(url, [*old, "old-noisy", "parent", "parent/0", "queued"])
    gone = [*old, "old-noisy"]
    kept = ["recent", "parent", "parent/0", "queued"]
    before = {run_id: rows_of(url, run_id) for run_id in gone + kept}
    assert before["old-noisy"] == (1, 2, 1), "a run with history and an event"
    assert before["parent/0"][1] == 2
    total = sql(url, "SELECT count(*) FROM durable_runs")[0][0]

    result = purge_cli("--older-than", "1d", "--db", url, "--yes", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "4 runs finished more than 1 day ago can be deleted." in result.stdout
    assert "Deleted 4 runs." in result.stdout
    assert sql(url, "SELECT count(*) FROM durable_runs")[0][0] == total - 4
    for run_id in gone:
        assert rows_of(url, run_id) == (0, 0, 0), f"{run_id}: every row goes"
    for run_id in kept:
        assert rows_of(url, run_id) == before[run_id], f"{run_id}: every row stays"
    again = purge_cli("--older-than", "1d", "--db", url, "--yes", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "No runs finished more than 1 day ago can be deleted." in again.stdout


@SQLITE
def test_without_a_terminal_it_asks_nothing(
    engine: durable.Engine, url: str, tmp_path: Path
) -> None:
    """With stdin not a terminal (cron, scripts) it deletes without asking, batch by
    batch."""
    ids = _old_finished(engine, url, 3)
    result = purge_cli("--older-than", "36h", "--db", url, "--batch", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Deleted 3 runs." in result.stdout
    assert all(rows_of(url, run_id) == (0, 0, 0) for run_id in ids)


@SQLITE
def test_on_a_terminal_it_asks_first(engine: durable.Engine, url: str, tmp_path: Path) -> None:
    """On a terminal it shows the count and deletes only after a yes."""
    ids = _old_finished(engine, url, 2)
    for answer, deleted in ((b"n\n", False), (b"y\n", True)):
        leader, follower = pty.openpty()
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "durable", "purge", "--older-than", "1d", "--db", url],
                stdin=follower,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
            )
            os.write(leader, answer)
            out, err = process.communicate(timeout=120)
        finally:
            os.close(follower)
            os.close(leader)
        assert process.returncode == 0, err
        assert "2 runs finished more than 1 day ago can be deleted." in out
        assert "Delete them, with their history and events? [y/N]" in out
        if deleted:
            assert "Deleted 2 runs." in out
        else:
            assert "Nothing deleted." in out
        assert all((rows_of(url, run_id)[0] == 0) is deleted for run_id in ids)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--older-than", "7x"], "'7x' is not an age"),
        (["--older-than", "7d", "--batch", "0"], "'0' is not a positive whole number"),
        ([], "the following arguments are required: --older-than"),
    ],
)
def test_bad_usage_exits_2(args: list[str], message: str, tmp_path: Path) -> None:
    """A malformed age or batch, or no age, is a usage error (exit 2) that says why."""
    result = purge_cli(*args, "--db", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr


def test_a_missing_database_file_exits_1(tmp_path: Path) -> None:
    """A SQLite path with no file is an error, not a new empty database."""
    missing = tmp_path / "nope.db"
    result = purge_cli("--older-than", "7d", "--db", f"sqlite:///{missing}", cwd=tmp_path)
    assert result.returncode == 1
    assert f"no database file at {missing}" in result.stderr
    assert not missing.exists()


def test_an_unreachable_server_exits_1(tmp_path: Path) -> None:
    """A database that cannot be reached is an error (exit 1) naming the URL."""
    url = "postgresql://postgres@127.0.0.1:1/test"
    result = purge_cli("--older-than", "7d", "--db", url, cwd=tmp_path)
    assert result.returncode == 1
    assert "Cannot connect to postgresql://postgres@127.0.0.1:1/test" in result.stderr


def test_help_shows_examples(tmp_path: Path) -> None:
    """`durable purge --help` explains the ages and what is kept, with examples."""
    result = purge_cli("--help", cwd=tmp_path)
    assert result.returncode == 0
    assert "durable purge --older-than 7d --db postgresql://app@db/app" in result.stdout
    assert "A deleted run's id can be used again." in result.stdout
