"""durable.ops.metrics on the memory backend: one set of metrics per registry fed by any
number of engines, the run duration on the engine's clock, the queue gauges cached and
never failing a scrape, and a clear error without prometheus-client."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import durable
import durable.ops
from durable import task, workflow
from durable.errors import ConfigurationError
from durable.ops import metrics
from durable.testing import DurableEnv
from tests.integration.test_metrics import parse

DAY = dt.datetime(2026, 5, 4, 12, tzinfo=dt.UTC)


@task
def double(n: int) -> int:
    return 2 * n


@workflow
def sleeps_an_hour(n: int) -> int:
    first = double(n)
    durable.wait(dt.timedelta(hours=1))
    return double(first)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[DurableEnv]:
    monkeypatch.setenv("DURABLE_TRACING", "0")  # the metrics observer alone: no spans
    with DurableEnv(start=DAY) as world:
        yield world


def samples(registry: CollectorRegistry) -> dict[str, Any]:
    return parse(metrics.Metrics.of(registry).exposition().decode())


def test_engines_sharing_a_registry_feed_one_set_of_metrics(env: DurableEnv) -> None:
    """Two engines instrumented into one registry register nothing twice and add up;
    adding an engine again counts nothing twice; another registry keeps its own."""
    registry, apart = CollectorRegistry(), CollectorRegistry()
    with durable.Engine("memory://") as other:
        shared = metrics.instrument(env.engine, registry=registry)
        assert metrics.instrument(other, registry=registry) is shared
        metrics.instrument(env.engine, registry=registry)  # again: no second observer
        metrics.instrument(other, registry=apart)
        assert env.execute(double, 2) == 4
        assert other.execute_call(double.bind(3)) == 6
        created = samples(registry)["durable_runs_created_total"]
        assert created == {(double.name,): 2}
        assert samples(apart)["durable_runs_created_total"] == {(double.name,): 1}
        owners = samples(registry)["durable_worker_running_runs"]
        assert set(owners) == {(env.engine.leases.owner,), (other.leases.owner,)}


def test_a_removed_engine_is_no_longer_counted(env: DurableEnv) -> None:
    """`Metrics.remove` takes the engine's observer and gauges away."""
    registry = CollectorRegistry()
    found = metrics.instrument(env.engine, registry=registry)
    env.execute(double, 1)
    found.remove(env.engine)
    assert not env.engine.observers
    env.execute(double, 5)
    assert samples(registry)["durable_runs_created_total"] == {(double.name,): 1}
    assert "durable_worker_running_runs" not in samples(registry)


def test_run_duration_is_from_creation_to_outcome_on_the_engine_clock(env: DurableEnv) -> None:
    """A run that slept an hour of virtual time is an hour long; its task attempts are
    their bodies' time (short), its two executions one released and one completed."""
    registry = CollectorRegistry()
    metrics.instrument(env.engine, registry=registry)
    handle = env.dispatch(sleeps_an_hour, 1)
    env.run_until_idle()
    assert handle.result() == 4
    found = parse(
        metrics.Metrics.of(registry).exposition().decode(),
        durable_run_duration_seconds_sum=("workflow", "status"),
        durable_task_duration_seconds_sum=("task", "outcome"),
    )
    run_seconds = found["durable_run_duration_seconds_sum"][(sleeps_an_hour.name, "completed")]
    assert run_seconds == pytest.approx(3600.0)
    assert 0 < found["durable_task_duration_seconds_sum"][(double.name, "completed")] < 1
    assert found["durable_runs_started_total"] == {(sleeps_an_hour.name,): 1}
    assert found["durable_run_executions_total"] == {
        ("released", sleeps_an_hour.name): 1,
        ("completed", sleeps_an_hour.name): 1,
    }


def test_the_queue_gauges_are_read_once_per_cache_period(env: DurableEnv) -> None:
    """Scrapes within the cache period cost one read of the queues; a queue once seen
    that emptied shows 0 rather than vanishing."""
    cached, fresh = CollectorRegistry(), CollectorRegistry()
    metrics.instrument(env.engine, registry=cached, cache=3600)
    metrics.instrument(env.engine, registry=fresh, cache=0)
    reads = []
    usage = env.backend.queue_usage

    def counted() -> Any:
        reads.append(1)
        return usage()

    env.engine.dispatch_call(double.bind(1), queue="mail")
    env.backend.queue_usage = counted  # type: ignore[method-assign]
    assert samples(cached)["durable_queue_depth"] == {("mail",): 1}
    assert samples(fresh)["durable_queue_depth"] == {("mail",): 1}
    assert len(reads) == 2
    env.drain()
    assert samples(cached)["durable_queue_depth"] == {("mail",): 1}  # as read an hour ago
    assert samples(fresh)["durable_queue_depth"] == {("mail",): 0}  # emptied
    assert len(reads) == 3


def test_a_database_that_cannot_be_read_leaves_the_queues_out(env: DurableEnv) -> None:
    """A failing queue read fails no scrape: the queue gauges are missing and
    ``durable_queue_read_ok`` is 0, until a read works again."""
    registry = CollectorRegistry()
    metrics.instrument(env.engine, registry=registry, cache=0)
    env.engine.dispatch_call(double.bind(1), queue="mail")
    usage = env.backend.queue_usage

    def down() -> Any:
        raise durable.errors.StorageError("the database is down")

    env.backend.queue_usage = down  # type: ignore[method-assign]
    found = samples(registry)
    assert found["durable_queue_read_ok"] == {(): 0}
    assert "durable_queue_depth" not in found and "durable_worker_running_runs" in found
    env.backend.queue_usage = usage  # type: ignore[method-assign]
    found = samples(registry)
    assert found["durable_queue_read_ok"] == {(): 1}
    assert found["durable_queue_depth"] == {("mail",): 1}


def without_prometheus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make prometheus_client impossible to import (and durable.ops.metrics imported
    afresh) until the test ends."""
    for name in [name for name in sys.modules if name.startswith("durable.ops.metrics")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr(durable.ops, "metrics", raising=False)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)


def test_without_prometheus_client_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Importing durable.ops.metrics without the extra raises ConfigurationError naming
    ``durable[metrics]``."""
    without_prometheus(monkeypatch)
    with pytest.raises(ConfigurationError, match=r"pip install 'durable\[metrics\]'"):
        import durable.ops.metrics  # noqa: F401


def test_bad_arguments_are_refused(env: DurableEnv) -> None:
    """A negative cache period and a port out of range are refused before anything is
    registered or bound."""
    with pytest.raises(ValueError, match="cache must be 0 or more seconds"):
        metrics.instrument(env.engine, registry=CollectorRegistry(), cache=-1)
    assert not env.engine.observers
    with pytest.raises(ValueError, match="0 to 65535"):
        metrics.serve(70000)
