"""The Backend contract of tallies (`TallyStore`), as executable checks (see
`_conformance.py`): a run counts as open from its creation and under its status once it
ends, a task call once it ends, an attempt a retry erased as ``retried``; filters and
sums work; the runs in each status are counted now."""

from __future__ import annotations

from durable.core.records import RunStatus, StepKind, StepStatus
from durable.core.tallies import BINNED, HOUR, MINUTE

from ._conformance import MakeBackend, _new, _opened, _queued, _step


def _counts(backend: object, grain: int, **filters: object) -> dict[tuple[str, str, str], int]:
    tallies = backend.tallies(grain, 0.0, by_bucket=False, by_bin=False, **filters)  # type: ignore[attr-defined]
    return {(t.kind, t.name, t.status): t.count for t in tallies}


def check_tallies_count_runs_and_calls(make: MakeBackend) -> None:
    """A run is tallied open when created and under its status when it ends (minute,
    hour and day); a task call when it ends (hour and day); day tallies split the
    durations by bin; status_counts counts the runs in each status now."""
    with _opened(make) as backend:
        backend.create_run(_new("run-1"))
        backend.create_run(_queued("run-2"))
        for grain in (MINUTE, HOUR, BINNED):
            assert _counts(backend, grain) == {("run", "app.workflow", "open"): 2}, grain
        backend.record(_step("run-1", 0, kind=StepKind.TASK, name="app.load"), 1)
        backend.finish_run("run-1", 1, RunStatus.COMPLETED, output=b"j1")
        ended = {
            ("run", "app.workflow", "open"): 1,
            ("run", "app.workflow", "completed"): 1,
        }
        assert _counts(backend, MINUTE) == ended, "the minute tallies count runs only"
        called = {**ended, ("task", "app.load", "completed"): 1}
        assert _counts(backend, HOUR) == _counts(backend, BINNED) == called
        assert _counts(backend, HOUR, kind="task") == {("task", "app.load", "completed"): 1}
        assert _counts(backend, HOUR, workflow="other.workflow") == {}
        binned = backend.tallies(BINNED, 0.0, kind="run", name="app.workflow", by_bucket=False)
        assert {t.bin >= 0 for t in binned if t.status == "completed"} == {True}
        hourly = backend.tallies(HOUR, 0.0, kind="run", by_bucket=False)
        assert {t.bin for t in hourly} == {-1}, "hour tallies are not split by bin"
        later = backend.tallies(HOUR, backend.now() + 2 * HOUR)
        assert list(later) == [], "since a later hour: nothing"
        counts = backend.status_counts(["queued", "running", "paused"])
        assert counts == {"queued": 1, "running": 0, "paused": 0}


def check_tallies_keep_an_erased_failure(make: MakeBackend) -> None:
    """A retry that erases a failed run's outcome and its failed call keeps both
    tallied as ``retried`` (the run itself open again), not as another run or call."""
    with _opened(make) as backend:
        backend.create_run(_new("run-1"))
        failed = _step(
            "run-1", 0, name="app.charge", status=StepStatus.FAILED, output=None, error=b"j1"
        )
        backend.record(failed, 1)
        backend.finish_run("run-1", 1, RunStatus.FAILED, error=b"j1")
        assert backend.retry_run("run-1", [0]) is not None
        assert _counts(backend, HOUR) == {
            ("run", "app.workflow", "open"): 1,
            ("run", "app.workflow", "retried"): 1,
            ("task", "app.charge", "retried"): 1,
        }
