"""SQLite on a disk that fills up, and on a file that turns read-only, under load.

The database lives on a small tmpfs of its own (``mount -t tmpfs``, which needs
root: CI runs as root). Without mount rights these tests skip locally and fail in CI.
``PRAGMA max_page_count`` is no substitute: it is a setting of one connection, so it
cannot fill the disk under the workers' own connections.

Read-only is made with the immutable attribute (``chattr +i`` on the directory and
the database files), which binds root too; ``mount -o remount,ro`` is refused while
processes hold the files open for writing, and so is useless here. Connections opened
before the change keep writing through their open files, so the read-only test
starts its workers after it: that is when a process meets a read-only database in
practice (a restart after a restore, or a deploy with the wrong owner).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable.errors import StorageError
from tests.chaos.fleet import (
    attempts_between,
    chaos_seed,
    log_lines,
    start_worker,
    unexplained_repeats,
)
from tests.e2e.checker import check
from tests.e2e.harness import Children
from tests.e2e.test_workers import finished, stop_all, until
from tests.e2e.workers_app import storm

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

REQUIRED = os.environ.get("CI") == "true" or os.environ.get("DURABLE_REQUIRE_POSTGRES") == "1"
TOTAL = 200
OPTIONS = ("--concurrency", "4", "--lease", "2")


def unavailable(reason: str) -> None:
    """Skip locally; fail in CI, where these tests must run."""
    if REQUIRED:
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def disk() -> Iterator[Path]:
    """An empty 128 MiB tmpfs, unmounted afterwards.

    Roomy on purpose: under load a WAL whose checkpoints are starved by readers can
    grow to tens of MiB, and the test must be the one that fills the disk."""
    root = Path(tempfile.mkdtemp(prefix="durable-disk-"))
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=128m,mode=0755", "tmpfs", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        root.rmdir()
        unavailable(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    try:
        yield root
    finally:
        attributes(root, "-i")
        if subprocess.run(["umount", str(root)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(root)], check=False)
        root.rmdir()


@pytest.fixture
def children(tmp_path: Path, disk: Path) -> Iterator[Children]:
    """Workers on a database on the small disk (the ledger stays off it)."""
    harness = Children(tmp_path, f"sqlite:///{disk / 'durable.db'}")
    try:
        yield harness
    finally:
        harness.close()


def attributes(root: Path, change: str) -> subprocess.CompletedProcess[str]:
    """``chattr`` the directory and every file in it (``+i``: immutable, even to root)."""
    paths = [root, *root.iterdir()]
    return subprocess.run(
        ["chattr", change, *map(str, paths)], capture_output=True, text=True, check=False
    )


def fill(root: Path) -> Path:
    """Write a file of zeros until the disk is full; return it."""
    sizes = {p.name: p.stat().st_size for p in root.iterdir()}
    print(f"files on the disk before filling it: {sizes}")
    filler = root / "filler"
    chunk = b"\0" * (1 << 16)
    try:
        # Unbuffered: a buffered file could keep the bytes that did not fit and fail
        # again when closed, outside the suppress below.
        f = filler.open("wb", buffering=0)
    except OSError as error:
        pytest.fail(f"the disk was full before the test filled it ({error}); files: {sizes}")
    with f, contextlib.suppress(OSError):
        while True:
            f.write(chunk)
    return filler


@contextlib.contextmanager
def stopped(children: Children, processes: list[subprocess.Popen[str]]) -> Iterator[None]:
    """SIGSTOP *processes* for the duration; SIGCONT them after."""
    for process in processes:
        children.kill(process, signal.SIGSTOP)
    try:
        yield
    finally:
        for process in processes:
            children.kill(process, signal.SIGCONT)


def integrity(path: Path) -> str:
    """``PRAGMA integrity_check`` of the database file, read only."""
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        return str(conn.execute("PRAGMA integrity_check").fetchone()[0])


def expected(prefix: str) -> dict[str, list[int]]:
    return {f"{prefix}-{i:03d}": [10 * i, 10 * i + 1, 10 * i + 2] for i in range(TOTAL)}


def dispatch_all(url: str, prefix: str) -> None:
    with durable.Engine(url) as engine:
        for i in range(TOTAL):
            engine.dispatch_call(storm.bind(i), run_id=f"{prefix}-{i:03d}")


def test_full_disk_pauses_work_and_loses_nothing(disk: Path, children: Children) -> None:
    """The disk fills mid-run: workers say so clearly and wait; once space returns
    all 200 workflows complete, checker clean, and the file passes integrity_check."""
    rng = chaos_seed()
    url = children.url
    dispatch_all(url, "full")
    workers = [start_worker(children, *OPTIONS, DURABLE_TEST_STEP_MS="10") for _ in range(2)]
    # Early, before SQLite's first checkpoint (at 1,000 WAL pages, some 75 runs in):
    # until then every commit grows the WAL, so the next write needs space. After a
    # checkpoint SQLite rewrites its WAL in place, and work whose pages fit there (and
    # in the database's existing pages) can finish on a full disk without needing a
    # byte: with fills at 20-40 % that happened in about one run of three. The workers
    # are stopped while the disk fills, which takes up to seconds on a busy machine:
    # otherwise the WAL could grow past that checkpoint meanwhile.
    fill_at = int(TOTAL * rng.uniform(0.1, 0.2))
    until(lambda: finished(url) >= fill_at, 60, f"{fill_at} runs to finish")

    filled = time.time()
    with stopped(children, workers):
        filler = fill(disk)
        wal = (disk / "durable.db-wal").stat().st_size
    assert wal < 1_000 * 4_120, f"the WAL ({wal} bytes) was checkpointed before the fill"
    done_when_full = finished(url)

    def told(worker: subprocess.Popen[str]) -> bool:
        return any(
            at >= filled and "disk holding the database is full" in line
            for at, line in log_lines(children, worker)
        )

    until(lambda: all(told(w) for w in workers), 30, "both workers to report the full disk")
    with durable.Engine(url) as engine, pytest.raises(StorageError) as caught:
        engine.dispatch_call(storm.bind(TOTAL), run_id="full-late")
    message = str(caught.value)
    print(f"dispatch on a full disk: {message}")
    assert "disk holding the database is full: free some space" in message
    time.sleep(2.0)  # hold the disk full while the workers back off
    stalled = finished(url)
    assert stalled < TOTAL, "the disk filled too late to matter; fill earlier"
    assert integrity(disk / "durable.db") == "ok"
    for worker in workers:
        assert worker.poll() is None, children.log(worker)

    held = time.time() - filled
    for worker in workers:
        retries = attempts_between(children, worker, filled, filled + held)
        print(f"worker {worker.pid}: {retries} logged retries in {held:.1f} s of full disk")
        assert retries / held <= 5, "workers must back off while the disk is full"

    filler.unlink()
    freed = time.monotonic()
    until(lambda: finished(url) >= TOTAL, 60, "the work to resume and finish")
    print(
        f"full at {done_when_full}/{TOTAL}, {stalled} done while full; "
        f"the rest took {time.monotonic() - freed:.1f} s once space returned"
    )
    stop_all(children, workers)
    report = check(url, children.ledger, expected("full"), only_killed_repeat=False)
    abandoned, unexplained = unexplained_repeats(children, workers)
    print(f"{report}; {abandoned} executions abandoned for the full disk")
    assert report.runs == TOTAL
    assert not unexplained, "only bodies whose results could not be stored may run again"
    assert integrity(disk / "durable.db") == "ok"
    with durable.Engine(url) as engine:
        assert engine.backend.get_run("full-late") is None, "a failed dispatch left a run"


def test_read_only_database_waits_until_writable(disk: Path, children: Children) -> None:
    """Workers started on a read-only database say so, keep running and retry; once it
    is writable again they finish everything, and nothing was corrupted."""
    rng = chaos_seed()
    url = children.url
    dispatch_all(url, "ro")
    first = start_worker(children, *OPTIONS, DURABLE_TEST_STEP_MS="10")
    crash_at = int(TOTAL * rng.uniform(0.2, 0.4))
    until(lambda: finished(url) >= crash_at, 60, f"{crash_at} runs to finish")
    children.kill(first, signal.SIGKILL)  # like a host restart
    made = attributes(disk, "+i")
    if made.returncode != 0:
        unavailable(f"cannot make the database immutable: {made.stderr.strip()}")
    before = finished(url)

    read_only = time.time()
    workers = [start_worker(children, *OPTIONS, DURABLE_TEST_STEP_MS="10") for _ in range(2)]

    def told(worker: subprocess.Popen[str]) -> bool:
        return any(
            at >= read_only and "read-only for this process" in line
            for at, line in log_lines(children, worker)
        )

    until(lambda: all(told(w) for w in workers), 30, "both workers to report it")
    with durable.Engine(url) as engine, pytest.raises(StorageError, match="read-only"):
        engine.dispatch_call(storm.bind(TOTAL), run_id="ro-late")
    time.sleep(2.0)
    assert finished(url) == before, "nothing can finish on a read-only database"
    assert integrity(disk / "durable.db") == "ok"
    for worker in workers:
        assert worker.poll() is None, children.log(worker)

    attributes(disk, "-i")
    writable = time.monotonic()
    until(lambda: finished(url) >= TOTAL, 60, "the work to resume and finish")
    print(f"read-only at {before}/{TOTAL}; finished {time.monotonic() - writable:.1f} s later")
    stop_all(children, workers)
    report = check(url, children.ledger, expected("ro"), killed=[first.pid])
    print(report)
    assert report.runs == TOTAL
    assert integrity(disk / "durable.db") == "ok"
