"""A SQLite database worth an overview, served, and what its tables say.

`seed` fills a database with genuine runs (made by durable itself: `fulfil` completes,
`checkout` fails in its task `charge`, two `approve` runs wait in a queue with limits,
a schedule) and with backdated runs that a real deployment would have made over the
last week, written as a bulk load would write them: inserted as queued, then ended by
an UPDATE, so whatever the database counts as runs are created and end counts them.

The `expected_*` functions read the runs table itself with sqlite3: the browser tests
compare the pages with them, never with the API the pages read. `scripts/screenshots.py`
uses the same seed for the docs' pictures.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import durable
from durable.runtime.defaults import swap
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard

#: the backdated workflows: name -> (runs in the last hour, runs over the week, seconds)
BACKDATED = {
    "shop.checkout": (30, 260, 0.35),
    "shop.refund": (8, 60, 4.0),
    "mail.digest": (4, 9, 2.0),
}
#: share of backdated runs ending in each status (the rest complete)
ENDINGS = [("failed", 0.06), ("timed_out", 0.02), ("dead", 0.01), ("cancelled", 0.02)]
QUEUE = "mail"
SCHEDULE = "nightly-report"


def _status(rng: random.Random) -> str:
    roll = rng.random()
    for status, share in ENDINGS:
        if roll < share:
            return status
        roll -= share
    return "completed"


def _backdate(path: Path, now: float) -> None:
    """Insert the backdated runs (and a blocked one) straight into the runs table."""
    rng = random.Random(21)
    rows: list[tuple[str, str, float, float, str]] = []
    for workflow, (recent, week, seconds) in BACKDATED.items():
        for n in range(recent):
            at = now - rng.uniform(90, 55 * 60)
            rows.append((f"{workflow}-m{n:03d}", workflow, at, seconds, _status(rng)))
        for n in range(week):
            at = now - rng.uniform(2 * 3600, 6.5 * 86400)
            rows.append((f"{workflow}-h{n:03d}", workflow, at, seconds, _status(rng)))
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db, db:
        for run_id, workflow, at, _, _ in rows:
            db.execute(
                "INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch,"
                " recoveries, created_at, updated_at) VALUES (?, ?, 'queued', ?, 'v1:00', 1,"
                " 0, ?, ?)",
                (run_id, workflow, b'j{"args":[],"kwargs":{}}', at, at),
            )
        for run_id, _, at, seconds, status in rows:
            db.execute(
                "UPDATE durable_runs SET status = ?, started_at = ?, finished_at = ?,"
                " updated_at = ? WHERE id = ?",
                (status, at, at + seconds, at + seconds, run_id),
            )
        at = now - 300
        db.execute(
            "INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch,"
            " recoveries, created_at, updated_at, started_at) VALUES ('shop.checkout-blocked',"
            " 'shop.checkout', 'blocked', ?, 'v1:00', 1, 0, ?, ?, ?)",
            (b'j{"args":[],"kwargs":{}}', at, at, at),
        )


def seed(engine: durable.Engine, path: Path) -> None:
    """Fill the SQLite database at *path*, which *engine* uses, for the overview."""
    now = time.time()
    _backdate(path, now)
    for n in range(3):
        engine.execute_call(wf.fulfil.bind(f"o-{n}"), run_id=f"order-{n}")
    for n in range(2):
        with contextlib.suppress(ValueError):
            engine.execute_call(wf.checkout.bind(f"o-{n}"), run_id=f"declined-{n}")
    durable.queue(QUEUE, concurrency=2, key_concurrency=1)
    for n in range(2):
        durable.dispatch(wf.approve, f"mail-{n}", id=f"mail-{n}", queue=QUEUE, key="tenant-a")
    durable.schedule(wf.echo, "report", id=SCHEDULE, every=dt.timedelta(hours=6))


@contextlib.contextmanager
def served(directory: Path) -> Iterator[Dashboard]:
    """A dashboard over a freshly seeded SQLite database in *directory*; no worker runs,
    so nothing changes the database while a test compares it with a page."""
    from durable.web import make_app, serve

    path = directory / "durable.db"
    engine = durable.Engine(f"sqlite:///{path}", lease=5.0)
    previous = swap(engine)
    app = make_app(engine)
    server = serve(app, host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        seed(engine, path)
        board = Dashboard(f"http://127.0.0.1:{server.server_port}", app.token, engine)
        board.ids["db"] = str(path)
        yield board
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        app.close()
        swap(previous)
        engine.close()


# -- what the database says ------------------------------------------------------------


def _query(board: Dashboard, sql: str, *params: object) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(board.ids["db"], timeout=30)) as db:
        return list(db.execute(sql, params))


def epoch(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


FAILED = ("failed", "dead", "timed_out")


def expected_status_count(board: Dashboard, status: str, since: str | None) -> int:
    """Runs in *status* now; created at or after *since* if given."""
    if since is None:
        rows = _query(board, "SELECT count(*) FROM durable_runs WHERE status = ?", status)
    else:
        rows = _query(
            board,
            "SELECT count(*) FROM durable_runs WHERE status = ? AND created_at >= ?",
            status,
            epoch(since),
        )
    return int(rows[0][0])  # type: ignore[call-overload]


def expected_ids(
    board: Dashboard,
    *,
    statuses: tuple[str, ...] = (),
    since: float | None = None,
    until: float | None = None,
    workflow: str | None = None,
) -> set[str]:
    """The ids of the runs a runs list filtered so must show."""
    where, params = ["1 = 1"], []
    if statuses:
        where.append(f"status IN ({', '.join('?' for _ in statuses)})")
        params.extend(statuses)
    if since is not None:
        where.append("created_at >= ?")
        params.append(since)
    if until is not None:
        where.append("created_at < ?")
        params.append(until)
    if workflow is not None:
        where.append("workflow = ?")
        params.append(workflow)
    sql = f"SELECT id FROM durable_runs WHERE {' AND '.join(where)}"
    return {str(row[0]) for row in _query(board, sql, *params)}


def expected_bucket(board: Dashboard, at: str, grain: int, series: str) -> int:
    """Runs created in [at, at + grain) of *series* (started: all; failed: also dead and
    timed out)."""
    statuses = {"started": (), "completed": ("completed",), "failed": FAILED}[series]
    start = epoch(at)
    return len(expected_ids(board, statuses=statuses, since=start, until=start + grain))


def expected_durations(board: Dashboard, workflow: str) -> list[float]:
    """The durations of *workflow*'s ended runs, shortest first."""
    rows = _query(
        board,
        "SELECT finished_at - coalesce(started_at, created_at) FROM durable_runs"
        " WHERE workflow = ? AND finished_at IS NOT NULL ORDER BY 1",
        workflow,
    )
    return [float(row[0]) for row in rows]  # type: ignore[arg-type]


def expected_task_failures(board: Dashboard, task: str) -> int:
    rows = _query(
        board,
        "SELECT count(*) FROM durable_history WHERE name = ? AND status = 'failed'",
        task,
    )
    return int(rows[0][0])  # type: ignore[call-overload]


def expected_queue(board: Dashboard, queue: str) -> tuple[int, int]:
    """(queued, running) runs of *queue*."""
    rows = _query(
        board,
        "SELECT sum(status = 'queued'), sum(status = 'running') FROM durable_runs WHERE queue = ?",
        queue,
    )
    return int(rows[0][0] or 0), int(rows[0][1] or 0)  # type: ignore[call-overload]


def expected_hourly(board: Dashboard, workflow: str, now: float) -> list[int]:
    """Runs of *workflow* created in each of the 24 hours up to and including the one
    holding *now*, oldest first."""
    first = (int(now // 3600) - 23) * 3600
    rows = _query(
        board,
        "SELECT CAST((created_at - ?) / 3600 AS INTEGER), count(*) FROM durable_runs"
        " WHERE workflow = ? AND created_at >= ? GROUP BY 1",
        first,
        workflow,
        first,
    )
    counts = [0] * 24
    for hour, count in rows:
        counts[int(hour)] += int(count)  # type: ignore[call-overload]
    return counts
