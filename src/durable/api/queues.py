"""Flow control: `queue` declares a queue's limits (docs/concepts/flow-control.md).

A run's own key and key limit are options of `dispatch` (``key=``, ``key_concurrency=``).
"""

from __future__ import annotations

import datetime as dt

from durable.core.queues import Queue, make_queue
from durable.runtime.defaults import get_engine


def queue(
    name: str,
    *,
    concurrency: int | None = None,
    key_concurrency: int | None = None,
    rate: tuple[int, dt.timedelta | float] | None = None,
    key_rate: tuple[int, dt.timedelta | float] | None = None,
) -> Queue:
    """Declare queue *name*'s limits, across every worker on every machine, replacing
    what it declared before (leave a limit out, or None, for no limit).

    Args:
        concurrency: at most this many of its runs running at once. A run holds a slot
            while it runs (a task body included) and not while it waits; a dead
            worker's slot is free once its lease expires.
        key_concurrency: at most this many running at once per key, for runs
            dispatched with ``key=`` and no ``key_concurrency=`` of their own.
        rate: ``(starts, period)``: at most *starts* runs start in any window of
            *period* (a sliding window: never more, however the starts fall). A run
            resumed after a wait is not a new start.
        key_rate: ``(starts, period)`` per key: at most *starts* runs of one key (runs
            dispatched with ``key=``) start in any window of *period*, counted from
            the key's runs (purging a run started in the window forgets its start).

    Returns:
        The queue as now stored.

    Raises:
        TypeError, ValueError: a limit is not a positive int, or the rate not a
            positive count per positive period; nothing changed.
    """
    limits = make_queue(
        name, concurrency=concurrency, key_concurrency=key_concurrency, rate=rate,
        key_rate=key_rate,
    )  # fmt: skip
    return get_engine().backend.put_queue(limits)
