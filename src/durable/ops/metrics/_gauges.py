"""The gauges read when metrics are scraped: each queue's depth, running runs and oldest
queued age (one cached read of the database), and the runs executing in this process.

The queues come from `QueueStore.queue_usage`, what ``durable queues`` shows: one
grouped count over the unfinished runs (and two small reads), kept for *cache* seconds
so that any number of scrapers costs one query per period. A queue that emptied shows
zeros rather than vanishing from the scrape. A database that cannot be
reached leaves the queue gauges out of that scrape (``durable_queue_read_ok`` says so);
it never fails the scrape.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from durable.backends import QueueUsage
from durable.runtime.engine import Engine

log = logging.getLogger("durable")


class Source:
    """One engine's gauges: its executing runs, and (if *queues*) its database's queues."""

    def __init__(self, engine: Engine, *, queues: bool, cache: float) -> None:
        self._engine = weakref.ref(engine)
        self.queues = queues
        self._cache = cache
        self._lock = threading.Lock()
        self._read_at = float("-inf")  # monotonic time of the kept reading
        self._usage: Sequence[QueueUsage] = ()
        self._known: set[str] = set()  # every queue read so far: an emptied one shows 0
        self.ok = True

    @property
    def engine(self) -> Engine | None:
        """The engine, or None once it was garbage collected."""
        return self._engine()

    def usage(self, engine: Engine) -> Sequence[QueueUsage] | None:
        """The queues as last read (again, if the reading is older than the cache
        period); None if the database could not be read."""
        with self._lock:  # one scraper reads; the others wait for its reading
            if time.monotonic() - self._read_at >= self._cache:
                try:
                    usage = list(engine.backend.queue_usage())
                    self._known.update(queue.name for queue in usage)
                    gone = self._known - {queue.name for queue in usage}
                    empty = [
                        QueueUsage(name=name, queued=0, running=0, oldest_queued_at=None)
                        for name in sorted(gone)
                    ]
                    self._usage, self.ok = usage + empty, True
                except Exception as error:
                    log.warning("metrics: could not read the queues: %s", error)
                    self.ok = False
                self._read_at = time.monotonic()
            return self._usage if self.ok else None


class Gauges(Collector):
    """A collector (registered once per registry) of the gauges of every source."""

    def __init__(self) -> None:
        self._sources: list[Source] = []
        self._lock = threading.Lock()

    def add(self, source: Source) -> None:
        with self._lock:
            self._sources = [s for s in self._sources if s.engine is not None] + [source]

    def remove(self, engine: Engine) -> None:
        with self._lock:
            self._sources = [s for s in self._sources if s.engine not in (None, engine)]

    def collect(self) -> Iterator[Metric]:
        def gauge(name: str, text: str, label: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, text, labels=[label])

        depth = gauge("durable_queue_depth", "Runs queued in each queue, ready to claim.", "queue")
        running = gauge(
            "durable_queue_running", "Runs of each queue running under a live lease.", "queue"
        )
        oldest = gauge(
            "durable_queue_oldest_age_seconds",
            "How long the oldest queued run of each queue has waited (0: none queued).",
            "queue",
        )
        read_ok = GaugeMetricFamily(
            "durable_queue_read_ok", "1 if the queue gauges' last read of the database worked."
        )
        executing = gauge(
            "durable_worker_running_runs",
            "Runs executing in this process now, per engine (by its lease owner).",
            "owner",
        )
        seen: set[str] = set()
        ok = True
        for source in self._sources:
            engine = source.engine
            if engine is None:
                continue
            executing.add_metric([engine.leases.owner], engine.leases.count())
            usage = source.usage(engine) if source.queues else ()
            if usage is None:
                ok = False
                continue
            now = engine.clock.now()  # the database's time, without a round trip
            for queue in usage:
                if queue.name in seen:
                    continue  # two engines on one database: the first one's reading
                seen.add(queue.name)
                age = 0.0 if queue.oldest_queued_at is None else now - queue.oldest_queued_at
                depth.add_metric([queue.name], queue.queued)
                running.add_metric([queue.name], queue.running)
                oldest.add_metric([queue.name], max(0.0, age))
        read_ok.add_metric([], 1.0 if ok else 0.0)
        yield from (depth, running, oldest, read_ok, executing)
