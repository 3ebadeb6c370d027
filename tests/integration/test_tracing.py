"""OpenTelemetry spans on SQLite, collected by the SDK's in-memory exporter: a span per
execution and per task attempt, under the span of the code that created the run,
wherever the run executes."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import durable
from durable import Worker, task, workflow
from durable.errors import ConfigurationError
from durable.runtime.defaults import configure

EXPORTER = InMemorySpanExporter()
_set = threading.Lock()
flaky_left: list[int] = []


@pytest.fixture(autouse=True)
def spans() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (set once: OpenTelemetry allows no second), its
    exporter emptied for each test."""
    with _set:
        if not isinstance(trace.get_tracer_provider(), TracerProvider):
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
            trace.set_tracer_provider(provider)
    EXPORTER.clear()
    yield EXPORTER
    EXPORTER.clear()


@pytest.fixture
def engine(sqlite_url: str) -> Iterator[durable.Engine]:
    """The default engine on a new SQLite file; waits suspend the run."""
    made = configure(sqlite_url, lease=5.0, max_inline_wait=0)
    try:
        yield made
    finally:
        made.close()


@task(retry=dict(attempts=3, initial=0))
def add_one(x: int) -> int:
    if flaky_left and flaky_left.pop():
        raise RuntimeError("not yet")
    return x + 1


@workflow
def pipeline(x: int) -> int:
    return add_one(add_one(x))


@workflow
def fans_out(x: int) -> list[int]:
    return durable.gather([add_one.bind(x), add_one.bind(x + 10)])


@workflow
def parent(x: int) -> int:
    return pipeline(x) * 2


@workflow
def waits(x: int) -> int:
    first = add_one(x)
    extra = durable.wait("more")
    return add_one(first + int(extra))


@workflow
def doomed() -> None:
    add_one(0)
    raise ValueError("no")


def _named(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in exporter.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


def _parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def test_an_execution_and_its_attempts_are_spans_under_the_callers_span(
    engine: durable.Engine, spans: InMemorySpanExporter
) -> None:
    """`execute` in a request's span: the run's span is its child, each task attempt
    (a failed one too, ERROR with its exception) a child of the run's span, with the
    run id, workflow, task, position, attempt and outcome as attributes."""
    tracer = trace.get_tracer("test")
    flaky_left[:] = [1]  # the first attempt fails
    with tracer.start_as_current_span("request") as request:
        assert durable.execute(pipeline.bind(1), id="p1") == 3
    named = _named(spans)
    (run,) = named[f"durable.run {pipeline.name}"]
    assert _parent_of(run) == request.get_span_context().span_id
    assert run.attributes is not None and dict(run.attributes) == {
        "durable.run_id": "p1",
        "durable.workflow": pipeline.name,
        "durable.resumed": False,
        "durable.outcome": "completed",
    }
    assert run.status.status_code is StatusCode.OK
    attempts = named[f"durable.task {add_one.name}"]
    assert [_parent_of(span) for span in attempts] == [_id(run)] * 3
    seen = [
        (a["durable.position"], a["durable.attempt"], a["durable.outcome"])
        for a in (span.attributes or {} for span in attempts)
    ]
    assert seen == [(0, 1, "failed"), (0, 2, "completed"), (1, 1, "completed")]
    failed = attempts[0]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "RuntimeError: not yet"
    assert [event.name for event in failed.events] == ["exception"]
    stored = durable.get("p1").run()
    assert stored is not None and stored.trace_context is not None
    traceparent = json.loads(stored.trace_context)["traceparent"]
    assert traceparent.split("-")[1] == f"{request.get_span_context().trace_id:032x}"


def test_a_dispatched_run_executes_in_the_trace_of_the_code_that_dispatched_it(
    engine: durable.Engine, spans: InMemorySpanExporter
) -> None:
    """A run dispatched in a request's span and executed later by a worker thread (where
    no span is current) is a child of that request's span."""
    with trace.get_tracer("test").start_as_current_span("request") as request:
        handle = durable.dispatch(pipeline.bind(5), id="d1")
    assert not spans.get_finished_spans()[:-1], "nothing but the request ran yet"
    with Worker(poll=0.02):
        assert handle.result(timeout=30) == 7
    named = _named(spans)
    (run,) = named[f"durable.run {pipeline.name}"]
    assert run.context is not None
    assert run.context.trace_id == request.get_span_context().trace_id
    assert _parent_of(run) == request.get_span_context().span_id
    assert [_parent_of(s) for s in named[f"durable.task {add_one.name}"]] == [_id(run)] * 2


def test_parallel_attempts_and_child_runs_are_children_of_their_runs_span(
    engine: durable.Engine, spans: InMemorySpanExporter
) -> None:
    """Attempts run on the fan-out's threads are children of their run's span; a child
    workflow's span is a child of its parent's."""
    assert durable.execute(fans_out.bind(1), id="f1") == [2, 12]
    assert durable.execute(parent.bind(1), id="c1") == 6
    named = _named(spans)
    (fan,) = named[f"durable.run {fans_out.name}"]
    (top,) = named[f"durable.run {parent.name}"]
    (child,) = named[f"durable.run {pipeline.name}"]
    assert fan.parent is None and top.parent is None, "no caller span: roots"
    assert _parent_of(child) == _id(top)
    assert child.attributes is not None and child.attributes["durable.parent_id"] == "c1"
    by_run: dict[str, list[int | None]] = {}
    for span in named[f"durable.task {add_one.name}"]:
        assert span.attributes is not None
        by_run.setdefault(str(span.attributes["durable.run_id"]), []).append(_parent_of(span))
    assert child.attributes["durable.run_id"] in by_run
    assert by_run == {"f1": [_id(fan)] * 2, child.attributes["durable.run_id"]: [_id(child)] * 2}


def test_a_resumed_run_is_a_second_execution_span_without_its_replayed_positions(
    engine: durable.Engine, spans: InMemorySpanExporter
) -> None:
    """A run that waits: its first execution ends ``released`` (OK), the one that
    resumes it is a sibling under the same caller span, ``durable.resumed``, holding an
    attempt only for the position that ran (the replayed one makes none)."""
    with trace.get_tracer("test").start_as_current_span("request") as request:
        handle = durable.dispatch(waits.bind(1), id="w1")
    with Worker(poll=0.02):
        _until(lambda: handle.status() is durable.RunStatus.WAITING)
        durable.send(handle, "more", 10)
        assert handle.result(timeout=30) == 13
    named = _named(spans)
    first, second = named[f"durable.run {waits.name}"]
    for span in (first, second):
        assert _parent_of(span) == request.get_span_context().span_id
    assert first.attributes is not None and second.attributes is not None
    assert (first.attributes["durable.outcome"], first.status.status_code) == (
        "released",
        StatusCode.OK,
    )
    assert (first.attributes["durable.resumed"], second.attributes["durable.resumed"]) == (
        False,
        True,
    )
    positions = [
        (_parent_of(span), span.attributes["durable.position"])  # type: ignore[index]
        for span in named[f"durable.task {add_one.name}"]
    ]
    assert positions == [(_id(first), 0), (_id(second), 2)]


@task
async def add_async(x: int) -> int:
    return x + 1


@workflow
async def gathers_async(x: int) -> list[int]:
    return await durable.gather_async([add_async.bind(x), add_async.bind(x + 1)])


def test_an_async_workflows_attempts_are_children_of_its_span(
    engine: durable.Engine, spans: InMemorySpanExporter
) -> None:
    """An async workflow executed on the caller's loop: its span is the caller's
    child, and its async attempts, gathered on the loop, are children of its span."""

    async def request() -> list[int]:
        with trace.get_tracer("test").start_as_current_span("request"):
            return await durable.execute_async(gathers_async.bind(1), id="a1")

    assert asyncio.run(request()) == [2, 3]
    named = _named(spans)
    (caller,) = named["request"]
    (run,) = named[f"durable.run {gathers_async.name}"]
    assert _parent_of(run) == _id(caller)
    attempts = named[f"durable.task {add_async.name}"]
    assert [_parent_of(span) for span in attempts] == [_id(run)] * 2


def test_a_failed_run_is_an_error_span_with_its_exception(
    engine: durable.Engine, spans: InMemorySpanExporter
) -> None:
    """A workflow that raises: its span's status is ERROR, with the exception."""
    with pytest.raises(ValueError, match="no"):
        engine.execute_call(doomed.bind(), run_id="x1")
    (run,) = _named(spans)[f"durable.run {doomed.name}"]
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes is not None and run.attributes["durable.outcome"] == "failed"
    (event,) = run.events
    assert event.attributes is not None and event.attributes["exception.type"] == "ValueError"


def test_tracing_turned_off_makes_no_spans_and_stores_no_context(
    sqlite_url: str, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tracing=False``, or ``DURABLE_TRACING=0``, leaves no observer: no span, no
    trace context stored; a value that is not a yes or a no is refused."""
    with durable.Engine(sqlite_url, tracing=False) as off:
        assert not off.observers
        with trace.get_tracer("test").start_as_current_span("request"):
            off.execute_call(pipeline.bind(1), run_id="off")
        stored = off.backend.get_run("off")
        assert stored is not None and stored.trace_context is None
    monkeypatch.setenv("DURABLE_TRACING", "0")
    with durable.Engine(sqlite_url) as env_off:
        assert not env_off.observers
    assert [span.name for span in spans.get_finished_spans()] == ["request"]
    monkeypatch.setenv("DURABLE_TRACING", "maybe")
    with pytest.raises(ConfigurationError, match="DURABLE_TRACING must be 1 or 0"):
        durable.Engine(sqlite_url)


def test_tracing_on_without_opentelemetry_is_a_clear_error(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tracing=True`` where opentelemetry is not installed says what to install;
    left unset, tracing is simply off there."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "opentelemetry" else real(name, *a),
    )
    with pytest.raises(ConfigurationError, match=r"pip install 'durable\[otel\]'"):
        durable.Engine(sqlite_url, tracing=True)
    with durable.Engine(sqlite_url) as unset:
        assert not unset.observers


def _until(condition: Any, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.e2e
def test_opentelemetry_is_imported_only_by_an_engine_that_traces() -> None:
    """``import durable`` imports no opentelemetry; an engine with tracing off neither;
    one with it on (the default where it is installed) does."""
    import subprocess
    import sys

    code = (
        "import sys, os, durable\n"
        "print('opentelemetry' in sys.modules)\n"
        "durable.Engine('memory://', tracing=False).close()\n"
        "print('opentelemetry' in sys.modules)\n"
        "durable.Engine('memory://').close()\n"
        "print('opentelemetry' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert out == ["False", "False", "True"]
