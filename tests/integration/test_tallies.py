"""The tallies' figures equal a reference computed in Python from the same runs.

Random runs, task calls and operator retries are written row by row as the engine
writes them (created, claimed, its steps, then moved to its final status), on memory, SQLite and
PostgreSQL; `durable stats` and the overview's charts are then compared with figures
this test computes itself from what it wrote: exact counts, success and last failure,
averages to the microsecond, and percentiles (over whole days, as their bins are
tallied) as the bin of the nearest-rank value (the reference: tally_reference.py).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durable
from durable.backends import Backend
from durable.core.tallies import DAY, HOUR, MINUTE, bucket
from durable.ops import Operations
from durable.ops._values import iso
from tests.conftest import BACKENDS
from tests.integration.tally_reference import FAILURES, Spec, Writer, expected, specs, write


@pytest.mark.parametrize("make_backend", BACKENDS, indirect=True)
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(runs=st.lists(specs, max_size=25), since_days=st.sampled_from([1, 3, 7, 10]))
def test_stats_equal_the_reference(
    make_backend: Callable[[], Backend], runs: list[Spec], since_days: int
) -> None:
    backend = make_backend()
    engine = durable.Engine(backend=backend)
    url = getattr(backend, "url", None)
    if url is not None and url.get_backend_name() == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    writer = Writer(backend, None if url is None else url.render_as_string(hide_password=False))
    try:
        now = backend.now()
        found = write(writer, runs, now)
        ops = Operations(engine)
        since = now - since_days * DAY
        before = time.time()
        shown = ops.stats(since=since)
        if bucket(time.time(), HOUR) != bucket(before, HOUR):
            return  # an hour turned while reading: the 24-hour window moved
        want = expected(found, since, backend.now())
        got = {("workflow", s["name"]): s for s in shown["workflows"]}
        got |= {("task", s["name"]): s for s in shown["tasks"]}
        assert set(got) == set(want)
        for key, figures in want.items():
            stat = got[key]
            for name in ("runs", "completed", "failed", "success", "p50_duration", "p95_duration"):
                assert stat[name] == figures[name], (key, name)
            assert stat["failures_24h"] == figures["failures_24h"], key
            if figures["avg_duration"] is None:
                assert stat["avg_duration"] is None
            else:
                assert stat["avg_duration"] == pytest.approx(figures["avg_duration"], abs=2e-6)
            last = figures["last_failure"]
            assert stat["last_failure_at"] == (None if last is None else iso(last)), key
        mine = [o for o in found if o.kind == "run" and o.status != "retried"]
        for point in ops.overview()["minutes"]:
            at = dt.datetime.fromisoformat(point["at"].replace("Z", "+00:00")).timestamp()
            inside = [o for o in mine if bucket(o.at, MINUTE) == at]
            assert point["started"] == len(inside)
            assert point["failed"] == sum(o.status in FAILURES for o in inside)
            assert point["completed"] == sum(o.status == "completed" for o in inside)
    finally:
        writer.close()
        engine.close()  # its backend too: examples must not pile up connections
