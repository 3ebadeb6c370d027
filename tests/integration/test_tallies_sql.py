"""How the SQL backends tally, on SQLite and PostgreSQL: the database puts a duration
in the bin Python would (at every bound), and counts a running execution's calls in
batches, at each renewal of its lease and when it ends, each call once."""

from __future__ import annotations

import bisect
import sqlite3
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from durable.backends import Backend
from durable.core.records import RunStatus, StepStatus
from durable.core.tallies import HOUR


@pytest.mark.parametrize(
    "make_backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_the_database_bins_like_python_at_every_bound(make_backend: Callable[[], Backend]) -> None:
    """Each bound, one microsecond below and above it, lands in the bin `bisect_left`
    gives, in SQL as in Python (PostgreSQL's width_bucket, SQLite's bisecting CASE)."""
    from durable.backends._tally_sql import TallySQL as _Dialect
    from durable.core.tallies import BOUNDS_US

    backend = make_backend()
    url = backend.url  # type: ignore[attr-defined]
    if url.get_backend_name() == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    engine = sa.create_engine(url.render_as_string(hide_password=False))
    try:
        dialect = _Dialect(engine.dialect)
        micros = sorted({m for b in BOUNDS_US for m in (b - 1, b, b + 1)} | {0, -5, 10**13})
        found: dict[int, int] = {}
        with engine.connect() as conn:
            for start in range(0, len(micros), 200):  # SQLite: 500 terms a compound at most
                values = " UNION ALL ".join(f"SELECT {m} AS m" for m in micros[start : start + 200])
                query = f"SELECT v.m, {dialect._bin('v.m')} FROM ({values}) AS v"
                found |= dict(conn.execute(sa.text(query)).fetchall())
        last = len(BOUNDS_US) - 1
        assert found == {m: min(bisect.bisect_left(BOUNDS_US, m), last) for m in micros}
    finally:
        engine.dispose()
        backend.close()


@pytest.mark.parametrize(
    "make_backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_running_execution_has_its_calls_counted_at_each_lease_renewal(
    make_backend: Callable[[], Backend],
) -> None:
    """The SQL backends count a run's calls in batches: not as each step is recorded,
    but at the next renewal of the run's lease while it runs (and when its execution
    ends), each call once however many renewals and ends follow."""
    from durable.testing._conformance import OWNER, _new, _step

    backend = make_backend()
    try:

        def calls() -> dict[str, int]:
            found = backend.tallies(HOUR, 0.0, kind="task", by_bucket=False, by_bin=False)
            return {t.status: t.count for t in found}

        backend.create_run(_new("run-1"))
        backend.record(_step("run-1", 0), 1)
        backend.record(_step("run-1", 1, status=StepStatus.FAILED, output=None, error=b"j1"), 1)
        assert calls() == {}, "recording a step counts nothing yet"
        assert backend.renew_leases(OWNER, 60) == 1
        assert calls() == {"completed": 1, "failed": 1}
        backend.record(_step("run-1", 2), 1)
        assert backend.renew_leases(OWNER, 60) == 1
        assert calls() == {"completed": 2, "failed": 1}
        assert backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j1")
        assert calls() == {"completed": 2, "failed": 1}, "each call is counted once"
    finally:
        backend.close()


def test_sqlite_counts_a_call_that_ends_after_its_run_once() -> None:
    """SQLite has no deferred triggers: a call that ends while its run is not running
    (a continued run's last step, written after its move; a call copied into a fork;
    another writer's) queues the run in `LATE_TABLE`, whose trigger counts its calls
    at once: each once, the queue left empty, whether it is inserted ended or ends by
    an update, in the transaction that moved the run or after it."""
    import tempfile
    from pathlib import Path

    from durable.backends._tallies_schema import LATE_TABLE
    from durable.backends.sql import SQLBackend
    from durable.testing._conformance import _new, _step

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "late.db"
        backend = SQLBackend(f"sqlite:///{path}")
        try:

            def calls() -> dict[str, int]:  # of every task, by status
                found = backend.tallies(HOUR, 0.0, kind="task", by_bucket=False, by_bin=False)
                counts: dict[str, int] = {}
                for t in found:
                    counts[t.status] = counts.get(t.status, 0) + t.count
                return counts

            backend.create_run(_new("run-1"))
            backend.record(_step("run-1", 0), 1)
            assert backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j1")
            assert calls() == {"completed": 1}
            write = sqlite3.connect(path, isolation_level=None)
            try:
                columns = "run_id, position, kind, name, call_hash, status, attempts, epoch"
                started = ", started_at, finished_at"
                write.execute(  # inserted ended, after the run's end
                    f"INSERT INTO durable_history ({columns}{started}) VALUES "
                    "('run-1', 1, 'task', 'app.late', 'v1:00', 'failed', 1, 1, 10.0, 12.0)"
                )
                assert calls() == {"completed": 1, "failed": 1}
                write.execute(  # started, then ended by an update, in one transaction
                    "BEGIN IMMEDIATE"
                )
                write.execute(
                    f"INSERT INTO durable_history ({columns}, started_at) VALUES "
                    "('run-1', 2, 'task', 'app.late', 'v1:00', 'running', 1, 1, 12.0)"
                )
                write.execute(
                    "UPDATE durable_history SET status = 'completed', finished_at = 13.0 "
                    "WHERE run_id = 'run-1' AND position = 2"
                )
                write.execute("COMMIT")
                assert calls() == {"completed": 2, "failed": 1}
                write.execute(  # a write that does not end a call counts nothing again
                    "UPDATE durable_history SET status = 'completed' WHERE run_id = 'run-1'"
                )
                assert calls() == {"completed": 2, "failed": 1}
                assert write.execute(f"SELECT count(*) FROM {LATE_TABLE}").fetchone() == (0,)
                tallied = "SELECT count(*) FROM durable_history WHERE tallied = 1"
                assert write.execute(tallied).fetchone() == (3,)
            finally:
                write.close()
        finally:
            backend.close()
