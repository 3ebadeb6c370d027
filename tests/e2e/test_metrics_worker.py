"""``durable worker --metrics-port``: the worker serves /metrics, and what it counts of a
known workload equals what the database holds; a port in use stops it at start, before
it claims anything."""

from __future__ import annotations

import re
import socket
import urllib.request

import pytest

import durable
from durable.ops import Operations
from tests.e2e.harness import Children
from tests.e2e.test_workers import stop_all, until
from tests.integration.metrics_app import database_counts, dispatch_workload, settled
from tests.integration.test_metrics import scraped

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.e2e
APP = "tests.integration.metrics_app"


def worker(children: Children, *options: str) -> list[str]:
    return ["-m", "durable", "worker", APP, "--db", children.url, "--log-level", "INFO", *options]


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_the_worker_serves_metrics_that_match_the_database(children: Children, url: str) -> None:
    """A worker started with ``--metrics-port 0`` logs the port it bound; scraped there
    after the workload, its counters of runs started and finished and of task attempts
    equal the database's (the runs were created by this test's process, not by it)."""
    with durable.Engine(url) as engine:
        dispatch_workload(engine)
        process = children.spawn(worker(children, "--metrics-port", "0"))
        until(lambda: "serving metrics at" in children.log(process), 30, "the metrics server")
        port = re.search(
            r"serving metrics at http://127\.0\.0\.1:(\d+)/metrics", children.log(process)
        )
        assert port is not None, children.log(process)
        until(settled(engine), 60, "the workload to settle")
        Operations(engine).cancel("waiter", actor="test")
        until(
            lambda: getattr(engine.backend.get_run("waiter"), "status", None) == "cancelled",
            60,
            "the waiter to be cancelled",
        )
        db = database_counts(engine)
        url_of_metrics = f"http://127.0.0.1:{port[1]}/metrics"
        with urllib.request.urlopen(url_of_metrics, timeout=10) as reply:
            found = scraped(reply.read().decode())
        stop_all(children, [process])
    assert "durable_runs_created_total" not in found  # created here, not by the worker
    assert found["durable_runs_started_total"] == db["started"]
    assert found["durable_runs_finished_total"] == db["finished"]
    assert found["durable_task_attempts_total"] == db["attempts"]
    # Its first scrape came after the default queue emptied: a queue shows once seen.
    assert found["durable_queue_depth"] == {("held-a",): 2, ("held-b",): 1}
    assert sum(db["finished"].values()) == 8 and sum(db["attempts"].values()) == 14


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_a_metrics_port_in_use_is_a_clear_error_before_any_claim(
    children: Children, url: str
) -> None:
    """The worker exits with status 2 naming the address and what to do, and the queued
    runs stay queued: it claimed nothing."""
    with durable.Engine(url) as engine:
        dispatch_workload(engine)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = children.spawn(worker(children, "--metrics-port", str(port)))
        assert process.wait(60) == 2
    log = children.log(process)
    assert f"Cannot serve metrics on 127.0.0.1:{port}: Address already in use" in log
    assert "Choose another --metrics-port" in log
    with durable.Engine(url) as engine:
        assert engine.backend.get_run("fine-0").status == "queued"
        assert engine.backend.get_run("fine-0").started_at is None


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_a_metrics_port_out_of_range_is_refused(children: Children, url: str) -> None:
    """``--metrics-port 70000`` is a usage error (status 2) that says what a port is."""
    process = children.spawn(worker(children, "--metrics-port", "70000"))
    assert process.wait(60) == 2
    assert "'70000' is not a port: give 0 to 65535" in children.log(process)
