"""The Backend contract of purging finished runs, as executable checks.

A purge deletes old finished runs with their history and events, and nothing that a
live run may still need: not the children of a live parent (its replay reads them),
not the ancestors of a live run (cancelling them must reach it), not a run that
finished after the cutoff, and never an unfinished run, however old.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from durable.backends import Backend
from durable.core.records import RunStatus

from ._conformance import OWNER, MakeBackend, _child, _new, _opened, _race, _step

FAR = 3600.0


def _finished(backend: Backend, run_id: str, *, parent: str | None = None) -> None:
    """Create run *run_id* (a child of *parent*), record two steps, and complete it."""
    backend.create_run(_new(run_id) if parent is None else _child(run_id, parent, owner=OWNER))
    backend.record(_step(run_id, 0), 1)
    backend.record(_step(run_id, 1), 1)
    assert backend.finish_run(run_id, 1, RunStatus.COMPLETED, output=b"j1")


def _cutoff(backend: Backend) -> float:
    """A moment after everything finished so far, and before anything finished later."""
    time.sleep(0.02)
    cutoff = backend.now()
    time.sleep(0.02)
    return cutoff


def _gone(backend: Backend, run_id: str) -> bool:
    return (
        backend.get_run(run_id) is None
        and not backend.load_history(run_id)
        and not backend.events(run_id)
    )


def _kept(backend: Backend, run_id: str) -> bool:
    return backend.get_run(run_id) is not None


def check_purge_old_finished_runs(make: MakeBackend) -> None:
    """purge deletes runs finished before the cutoff, whatever their ending, with their
    history and events; it keeps newer and unfinished runs, and their rows."""
    with _opened(make) as backend:
        _finished(backend, "completed")
        backend.create_run(_new("waited"))
        backend.suspend_run("waited", 1, wake_at=None, waiting_on="event:go")
        backend.send_event("waited", "go", b"j1")
        backend.send_event("waited", "other", b"j2")
        claimed = backend.claim_run("waited", owner=OWNER, lease=30, epoch=1)
        assert claimed is not None
        backend.finish_run("waited", 2, RunStatus.FAILED, error=b"jerr")
        backend.create_run(_new("cancelled", owner=None))
        backend.cancel_run("cancelled")
        backend.create_run(_new("dead"))
        backend.finish_run("dead", 1, RunStatus.DEAD, error=b"jdead")
        # Old, but not finished:
        backend.create_run(_new("running"))
        backend.create_run(_new("queued", owner=None))
        backend.create_run(_new("sleeping"))
        backend.suspend_run("sleeping", 1, wake_at=backend.now() + FAR, waiting_on=None)
        backend.create_run(_new("blocked"))
        backend.record(_step("blocked", 0), 1)
        backend.finish_run("blocked", 1, RunStatus.BLOCKED, error=b"jdiverged")
        cutoff = _cutoff(backend)
        _finished(backend, "recent")

        assert backend.purge(finished_before=cutoff, limit=100, dry_run=True) == 4, (
            "a dry run counts the 4 old finished runs"
        )
        assert _kept(backend, "completed"), "a dry run deletes nothing"
        assert backend.purge(finished_before=cutoff, limit=100) == 4
        for run_id in ("completed", "waited", "cancelled", "dead"):
            assert _gone(backend, run_id), f"{run_id!r}: the run, its history and events go"
        for run_id in ("running", "queued", "sleeping", "blocked", "recent"):
            assert _kept(backend, run_id), f"{run_id!r} must stay"
        assert len(backend.load_history("recent")) == 2, "kept runs keep their history"
        assert len(backend.load_history("blocked")) == 1
        assert backend.purge(finished_before=cutoff, limit=100) == 0, "nothing else may go"


def check_purge_keeps_what_live_runs_need(make: MakeBackend) -> None:
    """A finished child of a live parent stays, and so does a finished parent (and its
    parents) of a live run; a finished tree goes whole."""
    with _opened(make) as backend:
        # A live parent: its finished children stay (its replay reads them).
        backend.create_run(_new("live"))
        _finished(backend, "live/0", parent="live")
        backend.create_run(_new("parked"))
        _finished(backend, "parked/0", parent="parked")
        backend.suspend_run("parked", 1, wake_at=backend.now() + FAR, waiting_on=None)
        # A finished root whose grandchild still runs: the whole line stays; a
        # finished sibling line of it may go.
        _finished(backend, "root")
        _finished(backend, "root/0", parent="root")
        backend.create_run(_child("root/0/0", "root/0", owner=OWNER))
        _finished(backend, "root/1", parent="root")
        _finished(backend, "root/1/0", parent="root/1")
        # A finished tree: everything goes.
        _finished(backend, "tree")
        _finished(backend, "tree/0", parent="tree")
        _finished(backend, "tree/0/0", parent="tree/0")
        # A finished tree with one member that finished after the cutoff: all stay.
        _finished(backend, "late")
        backend.create_run(_child("late/0", "late", owner=OWNER))
        cutoff = _cutoff(backend)
        backend.finish_run("late/0", 1, RunStatus.COMPLETED, output=b"j1")

        deleted = backend.purge(finished_before=cutoff, limit=100)
        for run_id in ("live", "live/0", "parked", "parked/0"):
            assert _kept(backend, run_id), f"{run_id!r}: a live parent keeps its children"
        for run_id in ("root", "root/0", "root/0/0"):
            assert _kept(backend, run_id), f"{run_id!r}: a live run keeps the runs above it"
        for run_id in ("late", "late/0"):
            assert _kept(backend, run_id), f"{run_id!r}: a run finished after the cutoff"
        for run_id in ("root/1", "root/1/0", "tree", "tree/0", "tree/0/0"):
            assert _gone(backend, run_id), f"{run_id!r}: its whole line finished long ago"
        assert deleted == 5, f"5 runs may go, {deleted} were deleted"
        assert len(backend.load_history("live/0")) == 2


def check_purge_batches(make: MakeBackend) -> None:
    """purge deletes at most *limit* runs per call, oldest first, and finds the runs
    that may go behind any number of old runs that must stay."""
    with _opened(make) as backend:
        backend.create_run(_new("parent"))
        for i in range(5):  # old, finished, but children of a live parent
            _finished(backend, f"parent/{i}", parent="parent")
        for i in range(7):
            _finished(backend, f"old-{i}")
        cutoff = _cutoff(backend)
        assert backend.purge(finished_before=cutoff, limit=3) == 3
        assert [_kept(backend, f"old-{i}") for i in range(7)] == [False] * 3 + [True] * 4, (
            "the oldest go first"
        )
        assert backend.purge(finished_before=cutoff, limit=3) == 3
        assert backend.purge(finished_before=cutoff, limit=3) == 1
        assert backend.purge(finished_before=cutoff, limit=3) == 0
        assert all(_kept(backend, f"parent/{i}") for i in range(5))
        assert backend.create_run(_new("old-0"))[1], "a purged run's id can be used again"
        assert list(backend.load_history("old-0")) == [], "and the new run has no history"


def check_purge_race(make: MakeBackend) -> None:
    """Concurrent purges delete each run once: their counts add up to the runs deleted."""
    with _opened(make) as backend:
        for i in range(30):
            _finished(backend, f"r{i}")
        cutoff = _cutoff(backend)
        counts = _race(4, lambda _: backend.purge(finished_before=cutoff, limit=7))
        counts += _race(4, lambda _: backend.purge(finished_before=cutoff, limit=7))
        while (more := backend.purge(finished_before=cutoff, limit=7)) > 0:
            counts.append(more)
        assert all(backend.get_run(f"r{i}") is None for i in range(30))
        assert sum(counts) == 30, f"30 runs were deleted, the purges counted {counts}"


PURGE_CHECKS: tuple[Callable[[MakeBackend], None], ...] = (
    check_purge_old_finished_runs,
    check_purge_keeps_what_live_runs_need,
    check_purge_batches,
    check_purge_race,
)
