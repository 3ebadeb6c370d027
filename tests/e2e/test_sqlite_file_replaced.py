"""A `durable worker` whose SQLite file is replaced or deleted under it serves the new one.

Its pooled connections hold the old file: before, runs dispatched to the new file were
never claimed and nothing was logged. Now the worker notices within about a second,
says so in its log, and opens the path again.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

import durable
from durable import RunStatus
from tests.e2e.harness import Children
from tests.e2e.workers_app import storm

pytestmark = pytest.mark.e2e


def wait_for_start(children: Children, worker: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while "slots" not in children.log(worker):
        assert worker.poll() is None, children.log(worker)
        assert time.monotonic() < deadline, children.log(worker)
        time.sleep(0.05)


def run_one(url: str, i: int) -> durable.Run:
    """Dispatch storm(i) as another process would (a fresh engine on the path as it is
    now) and wait for a worker to finish it."""
    with durable.Engine(url) as engine:
        engine.dispatch_call(storm.bind(i), run_id=f"storm-{i}")
        run = engine.wait_for_run(f"storm-{i}", timeout=30)
        assert run.status is RunStatus.COMPLETED, run
        assert engine.load(run.output, run.id, None) == [10 * i, 10 * i + 1, 10 * i + 2]
        return run


def remove(path: Path) -> None:
    """Delete the database with its -wal and -shm files."""
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("how", ["restored", "deleted"])
def test_a_worker_serves_the_file_that_replaced_its_own(
    children: Children, url: str, tmp_path: Path, how: str
) -> None:
    path = Path(url.removeprefix("sqlite:///"))
    worker = children.start_worker("--concurrency", "2")
    wait_for_start(children, worker)
    run_one(url, 1)  # served from the file it opened

    if how == "restored":
        backup = tmp_path / "backup.db"
        with sqlite3.connect(path) as source, sqlite3.connect(backup) as target:
            source.backup(target)
        source.close()
        target.close()
        remove(path)
        os.replace(backup, path)
    else:
        remove(path)  # the next dispatch makes it again

    run = run_one(url, 2)  # dispatched to the new file: claimed and completed
    assert run.epoch == 1
    log = children.log(worker)
    assert f"The SQLite database {path}" in log, log
    # Deleted, it is usually made again by the dispatch before the worker looks.
    said = ["replaced by another file"] + (["was deleted"] if how == "deleted" else [])
    assert any(words in log for words in said), log
    assert "WARNING" in log
    assert worker.poll() is None, log
    with durable.Engine(url) as engine:
        first = engine.backend.get_run("storm-1")
        assert (first is not None) == (how == "restored"), "the backup holds run 1"
