"""The counters and histograms of durable's metrics, and the observer that feeds them
from one engine's runs and task attempts (`durable.runtime.observers`)."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from durable.core.clock import Clock
from durable.core.records import Run
from durable.runtime.observers import Attempt, Execution

#: A task attempt's body, in seconds: from a few milliseconds to an hour.
TASK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
#: A run, from its creation to its outcome, in seconds: it may have waited for days.
RUN_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800, 3600, 21600, 86400, 604800)

#: The outcomes of an execution that are its run's outcome, stored as its status. The
#: others (``released``, ``blocked``, ``interrupted``) leave the run to go on later.
FINISHED = frozenset({"completed", "failed", "cancelled", "timed_out", "continued"})


class Families:
    """durable's counters and histograms, registered once in one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, text: str, *labels: str) -> Counter:
            return Counter(name, text, labels, registry=registry)

        self.created = counter(
            "durable_runs_created",
            "Runs this process stored: dispatched, executed or started as children.",
            "workflow",
        )
        self.started = counter(
            "durable_runs_started",
            "Runs whose first execution began in this process (no history to replay).",
            "workflow",
        )
        self.executions = counter(
            "durable_run_executions",
            "Executions of runs in this process, by how they ended: a run's outcome, or "
            "released (it waits, or was handed back), blocked or interrupted.",
            "workflow",
            "outcome",
        )
        self.finished = counter(
            "durable_runs_finished",
            "Runs that reached their outcome in this process, by the status recorded.",
            "workflow",
            "status",
        )
        self.attempts = counter(
            "durable_task_attempts",
            "Task bodies run in this process (replayed positions are not attempts), by "
            "outcome: a failed attempt may be retried.",
            "task",
            "outcome",
        )
        self.task_seconds = Histogram(
            "durable_task_duration_seconds",
            "How long each task attempt's body ran, in seconds.",
            ("task", "outcome"),
            buckets=TASK_BUCKETS,
            registry=registry,
        )
        self.run_seconds = Histogram(
            "durable_run_duration_seconds",
            "Runs from their creation to their outcome (waits and queueing included), "
            "observed where the outcome was recorded, in seconds.",
            ("workflow", "status"),
            buckets=RUN_BUCKETS,
            registry=registry,
        )


class Counting:
    """The observer (`durable.runtime.observers.Observer`) of one engine: its runs and
    attempts counted into *families*; a run's age read on *clock*, the engine's.

    Each labelled child is looked up once and kept (``labels()`` checks its arguments
    and takes a lock, several microseconds on every step otherwise)."""

    def __init__(self, families: Families, clock: Clock) -> None:
        self._families = families
        self._clock = clock
        self._children: dict[tuple[Any, tuple[str, ...]], Any] = {}

    def child(self, family: Any, *labels: str) -> Any:
        """*family*'s child of these label values (kept: see the class)."""
        key = (family, labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = family.labels(*labels)
        return found

    def created(self, run: Run) -> None:
        self.child(self._families.created, run.workflow).inc()

    def execution(self, seen: Execution) -> _Executing:
        return _Executing(self, seen)

    def attempt(self, seen: Attempt) -> _Attempting:
        return _Attempting(self, seen)

    def ended(self, seen: Execution) -> None:
        """Count an execution that ended (its outcome set)."""
        families, workflow = self._families, seen.run.workflow
        outcome = seen.outcome or "interrupted"
        self.child(families.executions, workflow, outcome).inc()
        if outcome in FINISHED:
            self.child(families.finished, workflow, outcome).inc()
            age = max(0.0, self._clock.now() - seen.run.created_at)
            self.child(families.run_seconds, workflow, outcome).observe(age)

    def attempted(self, seen: Attempt, elapsed: float) -> None:
        """Count an attempt that ended after *elapsed* seconds (its outcome set)."""
        families, outcome = self._families, seen.outcome or "interrupted"
        self.child(families.attempts, seen.task, outcome).inc()
        self.child(families.task_seconds, seen.task, outcome).observe(elapsed)


class _Executing:
    """Around one execution: its start counted if it is the run's first."""

    __slots__ = ("_counting", "_seen")

    def __init__(self, counting: Counting, seen: Execution) -> None:
        self._counting, self._seen = counting, seen

    def __enter__(self) -> None:
        if not self._seen.resumed:
            counting = self._counting
            counting.child(counting._families.started, self._seen.run.workflow).inc()

    def __exit__(self, *exc: object) -> None:
        self._counting.ended(self._seen)


class _Attempting:
    """Around one attempt: its body timed."""

    __slots__ = ("_began", "_counting", "_seen")

    def __init__(self, counting: Counting, seen: Attempt) -> None:
        self._counting, self._seen = counting, seen
        self._began = 0.0

    def __enter__(self) -> None:
        self._began = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self._counting.attempted(self._seen, time.perf_counter() - self._began)
