"""Prometheus metrics after a known workload, scraped from the web app's ``/metrics`` and
read with prometheus_client's own parser: every counter agrees with the database, on
SQLite and PostgreSQL, and the queue gauges with what ``durable queues`` shows."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import durable
from durable import Worker
from durable.ops import Operations, metrics
from durable.web import make_app
from tests.integration.metrics_app import database_counts, dispatch_workload, settled
from tests.web.client import Client

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TOKEN = "metrics-test-token"

Samples = dict[str, Counter[tuple[str, ...]]]


def parse(text: str, **labels: tuple[str, ...]) -> Samples:
    """Each sample's values by name, keyed by the values of its labels: those given in
    *labels* for that name (in that order), else all of them sorted by label name."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            names = labels.get(sample.name, tuple(sorted(sample.labels)))
            key = tuple(sample.labels[name] for name in names)
            found.setdefault(sample.name, Counter())[key] += sample.value
    return found


def scraped(text: str) -> Samples:
    """The samples the tests compare, labelled as `database_counts` keys them."""
    return parse(
        text,
        durable_runs_finished_total=("workflow", "status"),
        durable_run_executions_total=("workflow", "outcome"),
        durable_task_attempts_total=("task", "outcome"),
        durable_task_duration_seconds_count=("task", "outcome"),
        durable_run_duration_seconds_count=("workflow", "status"),
    )


def until(condition: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the workload did not settle in time"
        time.sleep(0.05)


def run_workload(engine: durable.Engine, scrape: Callable[[], Samples]) -> None:
    """The workload of `metrics_app`, executed by a worker thread on the default queue;
    the waiter cancelled once it waits. *scrape* is called once all is queued."""
    dispatch_workload(engine)
    before = scrape()["durable_queue_depth"]
    assert before == {("default",): 8, ("held-a",): 2, ("held-b",): 1}
    with Worker(engine, queues=["default"], concurrency=4, poll=0.05):
        until(settled(engine))
        Operations(engine).cancel("waiter", actor="test")
        until(lambda: getattr(engine.backend.get_run("waiter"), "status", None) == "cancelled")


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_scraped_metrics_match_the_database_after_a_known_workload(url: str) -> None:
    """Runs created, started and finished by workflow and status, task attempts by
    outcome (the retried and failed ones included), the histograms' counts, the queue
    gauges and the running runs, as /metrics shows them, equal what the database holds."""
    registry = CollectorRegistry()
    with durable.Engine(url) as engine:
        metrics.instrument(engine, registry=registry, cache=0)
        client = Client(make_app(engine, token=TOKEN, metrics_registry=registry), token=TOKEN)

        def scrape() -> Samples:
            reply = client.request("GET", "/metrics")
            assert reply.status == 200 and reply.content_type == "text/plain"
            return scraped(reply.body.decode())

        run_workload(engine, scrape)
        db = database_counts(engine)
        queues = {queue["name"]: queue for queue in Operations(engine).queues()}
        found = scrape()
        owner = engine.leases.owner

    assert found["durable_runs_created_total"] == db["created"]
    assert found["durable_runs_started_total"] == db["started"]
    assert found["durable_runs_finished_total"] == db["finished"]
    assert found["durable_task_attempts_total"] == db["attempts"]
    assert found["durable_task_duration_seconds_count"] == db["attempts"]
    assert found["durable_run_duration_seconds_count"] == db["finished"]
    # What the workload is, so that the comparisons above cannot pass on nothing.
    fine, flaky, boom = (f"tests.integration.metrics_app.{n}" for n in ("fine", "flaky", "boom"))
    assert db["finished"][(fine, "completed")] == 3
    assert db["finished"][("tests.integration.metrics_app.waiter", "cancelled")] == 1
    assert db["attempts"] == {
        ("tests.integration.metrics_app.add", "completed"): 6,
        (boom, "failed"): 4,
        (flaky, "failed"): 2,
        (flaky, "completed"): 2,
    }
    assert db["created"][(fine,)] == 6 and db["started"][(fine,)] == 3
    waiter = "tests.integration.metrics_app.waiter"
    executions = found["durable_run_executions_total"]
    assert executions[(waiter, "released")] == executions[(waiter, "cancelled")] == 1

    depth, oldest = found["durable_queue_depth"], found["durable_queue_oldest_age_seconds"]
    assert depth == {("held-a",): 2, ("held-b",): 1, ("default",): 0}  # emptied: 0
    assert {(name,): queue["queued"] for name, queue in queues.items()} == {
        key: value for key, value in depth.items() if value
    }
    assert oldest[("default",)] == 0 and 0 < oldest[("held-b",)] < 120
    assert oldest[("held-a",)] >= oldest[("held-b",)]  # created first, waited longer
    assert found["durable_queue_running"] == {("held-a",): 0, ("held-b",): 0, ("default",): 0}
    assert found["durable_worker_running_runs"] == {(owner,): 0}
    assert found["durable_queue_read_ok"] == {(): 1}
