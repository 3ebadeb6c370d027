"""Workflows for the trace test's worker subprocess (tests/e2e/test_traces.py).

With ``$DURABLE_TEST_SPANS`` set (in the worker), this module sets the process's tracer
provider: every span ended is appended to that file as one JSON object per line, so
the test reads the worker's spans after it stops.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence

import durable
from durable import task, workflow


def _export_to(path: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import (
        SimpleSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    lock = threading.Lock()

    class FileExporter(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            lines = []
            for span in spans:
                assert span.context is not None
                lines.append(
                    json.dumps(
                        {
                            "name": span.name,
                            "trace_id": f"{span.context.trace_id:032x}",
                            "span_id": f"{span.context.span_id:016x}",
                            "parent": f"{span.parent.span_id:016x}" if span.parent else None,
                            "attributes": dict(span.attributes or {}),
                            "status": span.status.status_code.name,
                        }
                    )
                )
            with lock, open(path, "a") as out:
                out.write("".join(f"{line}\n" for line in lines))
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(FileExporter()))
    trace.set_tracer_provider(provider)


if os.environ.get("DURABLE_TEST_SPANS"):
    _export_to(os.environ["DURABLE_TEST_SPANS"])


@task
def step(x: int) -> int:
    durable.logger.info("step %d", x)
    return x + 1


@workflow
def inner(x: int) -> int:
    return step(x)


@workflow
def traced(x: int) -> int:
    return inner(step(x))
