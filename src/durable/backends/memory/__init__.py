"""MemoryBackend: dictionaries behind one lock, with the same semantics as SQL.

It is the reference implementation of the Backend contracts and what unit tests run
on. It keeps nothing across processes. Its clock is injectable, so a virtual clock can
drive lease expiry in tests. The class is assembled from one mixin per role of the
storage seam: runs and leases (_runs.py), the hand-over of continue-as-new
(_continuing.py), histories (_history.py), waits (_waits.py),
cancelling and pausing (_control.py), schedules (_schedules.py), queue limits
(_queues.py), streams (_streams.py), tallies (_tallies.py) and the operator's side
(_inspection.py), on the
shared state of _base.py.
"""

from __future__ import annotations

import itertools
import threading

from durable.backends._hub import Hub
from durable.core.clock import SYSTEM_CLOCK, Clock

from ._attributes import MemoryAttributes
from ._continuing import MemoryContinuing
from ._control import MemoryControl
from ._history import MemoryHistory
from ._inspection import MemoryInspection
from ._queues import MemoryQueues
from ._runs import MemoryRuns
from ._schedules import MemorySchedules
from ._streams import MemoryStreams
from ._tallies import MemoryTallies
from ._waits import MemoryWaits

__all__ = ["MemoryBackend"]


class MemoryBackend(
    MemoryRuns,
    MemoryContinuing,
    MemoryHistory,
    MemoryWaits,
    MemoryInspection,
    MemoryControl,
    MemorySchedules,
    MemoryQueues,
    MemoryAttributes,
    MemoryStreams,
    MemoryTallies,
):
    """An in-process backend for tests and demos. Nothing survives the process."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._runs = {}
        self._history = {}
        self._children = {}
        self._events = {}
        self._event_ids = itertools.count(1)
        self._actions = []
        self._attempts = []
        self._attributes = {}
        self._streams = {}
        self._stream_seqs = {}
        self._schedules = {}
        self._held = {}
        self._queues = {}
        self._rate_logs = {}
        self._debounced = {}
        self._closed = False
        self._hub = Hub()

    def close(self) -> None:
        """Forget everything; further calls raise StorageError."""
        with self._lock:
            self._closed = True
            self._runs.clear()
            self._history.clear()
        self._hub.notify_all()
