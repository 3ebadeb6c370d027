"""Queues as operators see them: how deep each is, how much of its limits it uses.

A queue shows here if runs wait in it or run from it, or if it declares limits
(`durable.queue`); see docs/concepts/flow-control.md.
"""

from __future__ import annotations

from typing import Any

from durable.backends import QueueUsage
from durable.core.queues import Queue, describe_rate
from durable.runtime.engine import Engine

from ._values import iso


def views(engine: Engine) -> list[dict[str, Any]]:
    """Every queue in use or declaring limits, by name (see `view`)."""
    backend = engine.backend
    declared = {queue.name: queue for queue in backend.list_queues()}
    usage = {used.name: used for used in backend.queue_usage()}
    now = backend.now()
    return [
        view(name, declared.get(name), usage.get(name), now) for name in sorted({*declared, *usage})
    ]


def view(name: str, queue: Queue | None, usage: QueueUsage | None, now: float) -> dict[str, Any]:
    """One queue as JSON: its depth (``queued``), its runs holding a slot (``running``),
    its limits (null: none), how long its oldest queued run has waited at *now*
    (seconds), and the running runs per key, the busiest first."""
    oldest = None if usage is None else usage.oldest_queued_at
    keys = {} if usage is None else usage.keys
    return {
        "name": name,
        "queued": 0 if usage is None else usage.queued,
        "running": 0 if usage is None else usage.running,
        "concurrency": None if queue is None else queue.concurrency,
        "key_concurrency": None if queue is None else queue.key_concurrency,
        "rate": None if queue is None else describe_rate(queue.rate, queue.per),
        "key_rate": None if queue is None else describe_rate(queue.key_rate, queue.key_per),
        "oldest_queued_at": iso(oldest),
        "oldest_queued_age": None if oldest is None else max(0.0, now - oldest),
        "keys": dict(sorted(keys.items(), key=lambda item: (-item[1], item[0]))),
    }
