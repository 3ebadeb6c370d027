"""The storage seam: what durable needs from a database, in domain terms.

`Backend` is what a backend implements: ten roles, each a Protocol of its own, plus
`close`. The roles split the contracts by concern, for reading and for code that
needs only one of them:

* `RunStore` (runs.py): runs and their leases;
* `HistoryStore` (history.py): the steps a run has recorded;
* `WaitStore` (waits.py): sleeping runs, events, and watching for changes;
* `InspectionStore` (inspection.py): listing, statistics, retries, actions, purging;
* `ControlStore` (control.py): cancelling, pausing and resuming runs;
* `ScheduleStore` (schedules.py): schedules stored, found due, and advanced;
* `QueueStore` (queues.py): the limits queues declare, and how queues are used;
* `AttributeStore` (attributes.py): what runs are searched by;
* `StreamStore` (streams.py): values a run writes for live readers;
* `TallyStore` (tallies.py): statistics counted as outcomes happen.

Every method is atomic. Payloads arrive and leave as opaque bytes. Times are seconds
since the epoch on the backend's own clock (the database clock on PostgreSQL), which is
the clock leases are judged by. `durable.testing.check_backend` is the executable form
of these contracts; a third-party backend passes it or is wrong.
"""

from __future__ import annotations

from typing import Protocol

from .attributes import AttributeStore
from .control import ControlStore
from .history import HistoryStore
from .inspection import InspectionStore
from .queues import QueueStore, QueueUsage
from .runs import RunStore
from .schedules import ScheduleStore
from .streams import StreamStore
from .tallies import TallyStore
from .waits import TIMERS, WaitStore, Watch

__all__ = [
    "TIMERS",
    "AttributeStore",
    "Backend",
    "ControlStore",
    "HistoryStore",
    "InspectionStore",
    "QueueStore",
    "QueueUsage",
    "RunStore",
    "ScheduleStore",
    "StreamStore",
    "TallyStore",
    "WaitStore",
    "Watch",
]


class Backend(
    RunStore,
    HistoryStore,
    WaitStore,
    InspectionStore,
    ControlStore,
    ScheduleStore,
    QueueStore,
    AttributeStore,
    StreamStore,
    TallyStore,
    Protocol,
):
    """Where runs and their histories live: every role of the storage seam."""

    def close(self) -> None:
        """Release connections and threads. The backend is unusable afterwards."""
        ...
