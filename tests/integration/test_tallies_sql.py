"""How the SQL backends tally, on SQLite and PostgreSQL: the database puts a duration
in the bin Python would (at every bound), and counts a running execution's calls in
batches, at each renewal of its lease and when it ends, each call once."""

from __future__ import annotations

import bisect
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


@pytest.mark.parametrize(
    "make_backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_continued_runs_last_step_is_counted_with_its_other_calls(
    make_backend: Callable[[], Backend],
) -> None:
    """No trigger is on history: `continue_run` records the run's last step before the
    move that counts its calls (on SQLite, whose triggers run at once, the order is
    what counts it), each once; a hand-over the run refuses records nothing."""
    from durable.testing._conformance import _new, _step
    from durable.testing._conformance_continuing import _successor

    backend = make_backend()
    try:

        def calls() -> dict[str, int]:  # of every task, by status
            found = backend.tallies(HOUR, 0.0, kind="task", by_bucket=False, by_bin=False)
            counts: dict[str, int] = {}
            for t in found:
                counts[t.status] = counts.get(t.status, 0) + t.count
            return counts

        backend.create_run(_new("base"))
        backend.record(_step("base", 0), 1)
        backend.record(_step("base", 1, status=StepStatus.RUNNING, output=None), 1)
        assert not backend.continue_run("base", 2, _successor("base~1"), last_step=_step("base", 1))
        assert [s.status for s in backend.load_history("base")] == [
            StepStatus.COMPLETED,
            StepStatus.RUNNING,
        ], "a refused hand-over records nothing"
        last = _step("base", 1, status=StepStatus.FAILED, output=None, error=b"j1")
        assert backend.continue_run("base", 1, _successor("base~1"), last_step=last)
        assert calls() == {"completed": 1, "failed": 1}, "each call, once"
    finally:
        backend.close()
