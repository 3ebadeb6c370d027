"""One trace from `dispatch` in this process to the task spans of a `durable worker`
subprocess on PostgreSQL, and the worker's JSON log lines for the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import durable
from tests.e2e.harness import Children
from tests.e2e.test_workers import finished, stop_all, until
from tests.e2e.trace_app import step, traced

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    "url", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_trace_runs_from_dispatch_into_a_worker_subprocess(
    children: Children, url: str, tmp_path: Path
) -> None:
    """The run dispatched in a request's span executes in a worker process whose span
    is a child of that request's span (same trace); its task spans are children of
    the run's span; its child workflow's span is a child of the run's span too; and the
    worker's ``--log-format json`` lines carry the run fields."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(TracerProvider())  # spans with real ids, exported nowhere
    tracer = trace.get_tracer("test")
    with durable.Engine(url) as engine, tracer.start_as_current_span("request") as request:
        engine.dispatch_call(traced.bind(1), run_id="traced-1")
    spans_file = tmp_path / "spans.jsonl"
    worker = children.spawn(
        ["-m", "durable", "worker", "tests.e2e.trace_app", "--db", url, "--log-format", "json"],
        DURABLE_TEST_SPANS=str(spans_file),
    )
    until(lambda: finished(url) == 2, 60, "the run and its child to finish")
    stop_all(children, [worker])
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    runs = {
        s["attributes"]["durable.run_id"]: s for s in spans if s["name"].startswith("durable.run")
    }
    top, child = runs.pop("traced-1"), runs.popitem()[1]
    context = request.get_span_context()
    assert top["name"] == f"durable.run {traced.name}"
    assert (top["trace_id"], top["parent"]) == (
        f"{context.trace_id:032x}",
        f"{context.span_id:016x}",
    )
    assert child["parent"] == top["span_id"] and child["trace_id"] == top["trace_id"]
    tasks = sorted(
        (s["attributes"]["durable.run_id"], s["attributes"]["durable.position"], s["parent"])
        for s in spans
        if s["name"] == f"durable.task {step.name}"
    )
    child_id = child["attributes"]["durable.run_id"]
    assert tasks == sorted([("traced-1", 0, top["span_id"]), (child_id, 0, child["span_id"])])
    assert {s["status"] for s in spans} == {"OK"}
    lines = [json.loads(line) for line in children.log(worker).splitlines() if line.strip()]
    logged = [
        (r["run_id"], r["position"], r["task"], r["attempt"])
        for r in lines
        if r["message"].startswith("step")
    ]
    assert sorted(logged) == sorted([("traced-1", 0, step.name, 1), (child_id, 0, step.name, 1)])
    assert all(r["logger"] and r["level"] and r["time"] for r in lines), "every line is a record"
