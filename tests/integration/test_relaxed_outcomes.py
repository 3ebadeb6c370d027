"""SQLite commits a run's outcome without an fsync of its own (backends/_relaxed.py).

What must hold: only the transaction that ends a run (completed, failed, cancelled)
runs at ``synchronous=NORMAL``; a new run, every step and a DEAD verdict commit at the
configured level; every connection is back at that level afterwards; the WAL is
fsynced within `DELAY` of a relaxed commit (or when the backend closes); and an
outcome lost to a power cut costs nothing but a replay. The statements each pooled
connection runs are read with SQLite's own trace callback.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable import RunStatus
from durable.backends import _relaxed
from durable.backends._group import Write, in_one_transaction, one_by_one
from durable.backends._relaxed import RelaxedCommits
from durable.backends.sql import SQLBackend
from durable.core.records import NewRun

#: What each level reads back as from ``PRAGMA synchronous``.
LEVELS = {"0": "OFF", "1": "NORMAL", "2": "FULL", "3": "EXTRA"}


class Traced:
    """A SQLite backend whose connections log every statement they run."""

    def __init__(self, url: str) -> None:
        self.backend = SQLBackend(url)
        self.statements: list[str] = []
        db = self.backend._db
        db._drop_idle()  # the connection that created the schema was not traced
        opener = db._open

        def traced() -> sqlite3.Connection:
            conn: sqlite3.Connection = opener()
            conn.set_trace_callback(self._heard)
            return conn

        db._open = traced

    def _heard(self, sql: str) -> None:
        """Log *sql*, once: SQLite reports a statement again at the start of each trigger
        program it runs (the tallies' triggers), with the same text, its parameters
        expanded, so a repeat right after it is that, not another write."""
        if not self.statements or self.statements[-1] != sql:
            self.statements.append(sql)

    def writes(self, configured: str = "FULL") -> list[tuple[str, str]]:
        """(what, the synchronous level it committed at) for each write, in order; the
        level the URL configured reads as "configured"."""
        level = "configured"
        found: list[tuple[str, str]] = []
        group: list[str] | None = None  # the writes of an open transaction
        for sql in self.statements:
            text = " ".join(sql.split())
            what = None
            if text.startswith("PRAGMA synchronous="):
                level = text.split("=", 1)[1]
                level = "configured" if level == configured else level
            elif text.startswith("BEGIN"):
                group = []
            elif text == "COMMIT" and group is not None:
                if group:  # one commit: its writes joined, "step+step"
                    found.append(("+".join(group), level))
                group = None
            elif text.startswith("INSERT INTO durable_runs"):
                what = "create"
            elif text.startswith("INSERT INTO durable_history"):
                what = "result+start" if "UNION ALL" in text else "step"
            elif text.startswith("UPDATE durable_runs SET status="):
                what = "finish"
            if what is not None:
                if group is None:
                    found.append((what, level))
                else:
                    group.append(what)
        return found

    def pooled_levels(self) -> set[str]:
        """The synchronous level of every idle pooled connection."""
        sessions = list(self.backend._db._idle)
        assert sessions, "the backend pools its connections"
        return {LEVELS[str(s.execute("PRAGMA synchronous").fetchone()[0])] for s in sessions}


@pytest.fixture
def traced(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Traced]:
    level = getattr(request, "param", None)
    query = f"?synchronous={level}" if level else ""
    made = Traced(f"sqlite:///{tmp_path / 'relaxed.db'}{query}")
    yield made
    made.backend.close()


bodies: list[int] = []


@durable.task
def relaxed_step(i: int) -> int:
    bodies.append(i)
    return i * 10


@durable.workflow
def relaxed_flow(n: int) -> list[int]:
    return [relaxed_step(i) for i in range(n)]


@durable.workflow
def relaxed_plain(n: int) -> list[int]:
    """No durable call: its outcome is relaxed (a completed run's last task's result
    goes with the outcome, which then commits synced)."""
    return [i * 10 for i in range(n)]


@durable.workflow
def relaxed_failure() -> None:
    relaxed_step(0)
    raise ValueError("the workflow's own error")


@pytest.mark.parametrize("traced", [None, "EXTRA"], indirect=True, ids=["FULL", "EXTRA"])
def test_only_the_outcome_skips_its_fsync(traced: Traced) -> None:
    configured = "EXTRA" if "EXTRA" in traced.backend.url.render_as_string() else "FULL"
    durable.configure(backend=traced.backend)
    assert durable.execute(relaxed_flow, 3) == [0, 10, 20]
    with pytest.raises(ValueError, match="own error"):
        durable.execute(relaxed_failure)
    writes = traced.writes(configured)
    # Each task's start is written with the previous task's result, in one statement;
    # the last result goes with a completed run's outcome (just before it: the move then
    # counts every call in the tallies), so that commit is synced.
    # A failed run's outcome follows from its history, and a run created for its owner
    # has done nothing yet: both relaxed, the next synced commit covers the creation.
    assert writes == [
        ("create", "NORMAL"),
        ("step", "configured"),
        *[("result+start", "configured")] * 2,
        ("step+finish", "configured"),
        ("create", "NORMAL"),
        ("step", "configured"),
        ("step", "configured"),
        ("finish", "NORMAL"),
    ], writes
    assert traced.statements.count(f"PRAGMA synchronous={configured}") == 3
    assert traced.pooled_levels() == {configured}, "each connection is set back"


def test_a_dead_verdict_is_synced(traced: Traced) -> None:
    backend = traced.backend
    backend.create_run(
        NewRun(id="r", workflow="app.w", input=b"j[]", call_hash="h", owner="o", lease=30.0)
    )
    assert backend.finish_run("r", 1, RunStatus.DEAD, error=b"jnull")
    # Created for its owner: relaxed; the verdict is not implied by a history: synced.
    assert traced.writes() == [("create", "NORMAL"), ("finish", "configured")]


def test_a_dispatched_run_is_synced(traced: Traced) -> None:
    """dispatch() returns a handle others may act on: its run is fsynced first."""
    queued = NewRun(id="q", workflow="app.w", input=b"j[]", call_hash="h", owner=None, lease=None)
    traced.backend.create_run(queued)
    assert traced.writes() == [("create", "configured")]
    assert not any("NORMAL" in sql for sql in traced.statements)


@pytest.mark.parametrize("traced", ["NORMAL"], indirect=True)
def test_nothing_to_relax_at_normal(traced: Traced) -> None:
    durable.configure(backend=traced.backend)
    assert durable.execute(relaxed_flow, 1) == [0]
    assert traced.backend._db.relax is None
    assert not any(sql.startswith("PRAGMA") for sql in traced.statements)
    assert traced.pooled_levels() == {"NORMAL"}


def test_an_outcome_lost_to_a_power_cut_is_replayed_not_rerun(tmp_path: Path) -> None:
    """What the disk holds if the unsynced outcome is lost: the run RUNNING under an
    owner that is gone, every step recorded. Recovery finishes it the same way without
    running a task body again."""
    url = f"sqlite:///{tmp_path / 'lost.db'}"
    engine = durable.configure(url)
    bodies.clear()
    assert durable.execute(relaxed_flow, 3, id="lost") == [0, 10, 20]
    assert bodies == [0, 1, 2]
    with sqlite3.connect(tmp_path / "lost.db") as conn:  # the row before its outcome
        conn.execute(
            "UPDATE durable_runs SET status = 'running', output = NULL, finished_at = NULL, "
            "lease_owner = 'elsewhere:1:1:gone', lease_until = 0 WHERE id = 'lost'"
        )
    assert durable.recover() == ["lost"]
    run = engine.reread("lost")
    assert run.status is RunStatus.COMPLETED
    assert engine.outcome(run) == [0, 10, 20]
    assert durable.execute(relaxed_flow, 3, id="lost") == [0, 10, 20]
    assert bodies == [0, 1, 2], "no task body ran again"
    engine.close()


def _fsynced_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    paths: list[str] = []
    real = os.fdatasync

    def fdatasync(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(_relaxed.os, "fdatasync", fdatasync)
    return paths


def test_the_wal_is_fsynced_soon_after_a_relaxed_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _fsynced_paths(monkeypatch)
    wal = tmp_path / "x.db-wal"
    wal.write_bytes(b"frames")
    relax = RelaxedCommits(tmp_path / "x.db", "FULL", delay=0.05)
    try:
        time.sleep(0.2)
        assert paths == [], "nothing to make durable yet"
        started = time.monotonic()
        for _ in range(5):
            relax.committed()  # several commits in a row share one fsync
        deadline = started + 5
        while not paths and time.monotonic() < deadline:
            time.sleep(0.005)
        took = time.monotonic() - started
        assert paths == [str(wal)]
        assert 0.04 <= took < 2, took
        time.sleep(0.2)
        assert paths == [str(wal)], "and no more until the next relaxed commit"
        relax.committed()
        while len(paths) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert paths == [str(wal)] * 2
    finally:
        relax.close()


def test_closing_fsyncs_what_is_still_pending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _fsynced_paths(monkeypatch)
    (tmp_path / "x.db-wal").write_bytes(b"frames")
    relax = RelaxedCommits(tmp_path / "x.db", "FULL", delay=60)
    relax.committed()
    time.sleep(0.05)
    assert paths == []
    relax.close()
    assert paths == [str(tmp_path / "x.db-wal")], "close() does not wait for the delay"
    relax.committed()
    relax.close()
    assert len(paths) == 1, "a closed backend schedules nothing"


def test_a_missing_wal_is_not_an_error(tmp_path: Path) -> None:
    relax = RelaxedCommits(tmp_path / "gone.db", "FULL", delay=0)
    relax.committed()
    relax.close()  # the WAL was checkpointed and deleted: nothing left to sync
    assert relax.flushes == 0


def test_a_closed_backend_has_synced_its_outcomes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _fsynced_paths(monkeypatch)
    monkeypatch.setattr(_relaxed, "DELAY", 60.0)
    engine = durable.configure(f"sqlite:///{tmp_path / 'c.db'}")
    # Another process still has the file open: closing this backend leaves the WAL
    # in place (the last connection to close would checkpoint it into the database).
    other = sqlite3.connect(tmp_path / "c.db")
    other.execute("SELECT count(*) FROM durable_runs").fetchall()
    try:
        assert durable.execute(relaxed_plain, 1) == [0]
        assert paths == []
        engine.close()
        assert paths == [str(tmp_path / "c.db-wal")]
    finally:
        other.close()


def test_a_batch_is_relaxed_only_if_all_its_writes_are(traced: Traced) -> None:
    """Group commit puts concurrent writes in one transaction: one write that needs its
    fsync makes the whole batch synced."""
    write_batch = in_one_transaction(traced.backend._db, "Testing")

    def meta(key: str, *, synced: bool) -> Write:
        sql = f"INSERT INTO durable_meta (key, value) VALUES ('{key}', 'x')"
        return Write(sql, (), synced=synced)

    mixed = [meta("a", synced=False), meta("b", synced=True)]
    write_batch(mixed)
    assert [w.rows for w in mixed] == [[(1,)], [(1,)]], "each write's row count"
    assert not any("NORMAL" in sql for sql in traced.statements)
    relaxed = [meta("c", synced=False), meta("d", synced=False)]
    write_batch(relaxed)
    assert [w.rows for w in relaxed] == [[(1,)], [(1,)]]
    assert traced.statements.count("PRAGMA synchronous=NORMAL") == 1
    assert traced.pooled_levels() == {"FULL"}


def test_a_forked_child_fsyncs_its_own_outcomes(tmp_path: Path) -> None:
    """A child forked while the parent's fsync thread may hold its lock starts afresh:
    it commits outcomes, runs a thread of its own and fsyncs its WAL when it closes."""
    engine = durable.configure(f"sqlite:///{tmp_path / 'fork.db'}")
    assert durable.execute(relaxed_plain, 1) == [0]
    relax = engine.backend._db.relax  # type: ignore[attr-defined]
    parent_thread = relax._thread
    assert parent_thread is not None and parent_thread.is_alive()
    # The worst moment to fork: another thread (as the fsync thread may) holds the lock.
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with relax._due:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit code
        code = 1
        try:
            if durable.execute(relaxed_plain, 2) == [0, 10]:
                child_thread = relax._thread
                ok = child_thread is not None and child_thread is not parent_thread
                engine.close()
                code = 0 if ok and relax.flushes >= 1 else 2
        finally:
            os._exit(code)
    release.set()
    holder.join()
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    if done[0] == 0:  # pragma: no cover - only when the child hangs
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the forked child hung on the lock it inherited")
    assert os.waitstatus_to_exitcode(done[1]) == 0
    engine.close()


def test_a_failed_relaxed_transaction_sets_the_level_back(traced: Traced) -> None:
    """A relaxed transaction that fails rolls back and leaves its connection at the
    configured level; no fsync is promised for it."""
    relax = traced.backend._db.relax
    assert relax is not None
    bad = Write("INSERT INTO nowhere VALUES (1)", (), synced=False)
    one_by_one(traced.backend._db, "Testing", [bad])
    assert bad.error is not None and "nowhere" in str(bad.error)
    assert traced.statements[-1] == "PRAGMA synchronous=FULL"
    assert "ROLLBACK" in traced.statements
    assert traced.pooled_levels() == {"FULL"}
    assert relax._pending is False, "a rolled-back transaction needs no fsync"
