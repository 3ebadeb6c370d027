"""Spans of a workflow, printed as a tree: one trace from a "request" into the run.

    pip install 'durable[otel]' opentelemetry-sdk
    python examples/tracing.py

The application sets a tracer provider once (here with the SDK's in-memory exporter;
a service would add an OTLP exporter, see docs/howto/observability.md) and durable's
spans follow with no further call: the run's span under the request's, a span per
task attempt under the run's, a failed attempt marked ERROR. Log lines from
`durable.logger` carry the run's fields.
"""

from __future__ import annotations

import logging
import sys

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import durable
from durable import task, workflow

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

logging.basicConfig(
    stream=sys.stdout, format="log: %(message)s (task %(task)s, attempt %(attempt)s)"
)
durable.logger.setLevel(logging.INFO)

attempts = {"charge": 0}


@task(retry=dict(attempts=3, initial=0.01))
def charge(order: str) -> str:
    attempts["charge"] += 1
    durable.logger.info("charging %s, attempt %d", order, attempts["charge"])
    if attempts["charge"] == 1:
        raise ConnectionError("the payment service hung up")
    return f"receipt for {order}"


@task
def ship(order: str) -> str:
    return f"parcel for {order}"


@workflow
def checkout(order: str) -> list[str]:
    return [charge(order), ship(order)]


def show(span: ReadableSpan, children: dict[int | None, list[ReadableSpan]], depth: int) -> None:
    attributes = dict(span.attributes or {})
    where = f"position {attributes['durable.position']}" if "durable.task" in attributes else ""
    outcome = attributes.get("durable.outcome", "")
    words = [span.name, where, str(outcome), span.status.status_code.name]
    print("  " * depth + " ".join(word for word in words if word))
    assert span.context is not None
    for child in children.get(span.context.span_id, []):
        show(child, children, depth + 1)


if __name__ == "__main__":
    durable.configure("memory://")
    with trace.get_tracer("shop").start_as_current_span("POST /checkout"):
        durable.execute(checkout, "o-42")
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0):
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)
    print("trace:")
    for root in children[None]:
        show(root, children, 1)
