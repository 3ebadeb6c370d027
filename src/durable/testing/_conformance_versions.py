"""Conformance checks of code versions: runs stamped with the version of the code that
created them, then of the code that first started them; claims limited to one version
(``only_version``: that version's runs and runs of no version) on every claim path;
listing by version.

A run "started" here is one created for an owner and released: QUEUED again, with its
``started_at`` set, as a run woken from a wait or handed back is.
"""

from __future__ import annotations

import dataclasses

from durable.backends import Backend
from durable.core.queues import Queue
from durable.core.records import NewRun, Run, RunQuery, RunStatus

from ._conformance import OTHER, OWNER, MakeBackend, _get, _new, _opened, _queued


def _versioned(new: NewRun, version: str | None) -> NewRun:
    return dataclasses.replace(new, version=version)


def _started(backend: Backend, run_id: str, version: str | None, queue: str = "default") -> Run:
    """A run that *version*'s code started, now QUEUED again (released)."""
    new = dataclasses.replace(_new(run_id), version=version, queue=queue)
    run, created = backend.create_run(new)
    assert created and run.started_at is not None
    assert backend.release_run(run_id, run.epoch), "a running run can be released"
    return _get(backend, run_id)


def _claim_all(
    backend: Backend, *, version: str | None, only: bool, queue: str = "default"
) -> set[str]:
    claimed = backend.claim_next(
        owner=OTHER,
        queue=queue,
        workflows=["app.workflow"],
        limit=10,
        lease=30,
        version=version,
        only_version=only,
    )
    return {run.id for run in claimed}


def _claim_one(
    backend: Backend, run_id: str, epoch: int, version: str, *, dead_owner: str | None = None
) -> Run | None:
    """claim_run by a claimer that serves only *version*."""
    return backend.claim_run(
        run_id,
        owner=OTHER,
        lease=30,
        epoch=epoch,
        dead_owner=dead_owner,
        version=version,
        only_version=True,
    )


def check_version_stamped_on_create_and_first_start(make: MakeBackend) -> None:
    """A run carries the version it was created with until a claim first starts it: a
    claimer with a version stamps its own then; later claims keep the run's version."""
    with _opened(make) as backend:
        owned, _ = backend.create_run(_versioned(_new("owned"), "v1"))
        assert owned.version == "v1" and _get(backend, "owned").version == "v1", (
            "create_run stores NewRun.version (a run created for its owner started there)"
        )
        backend.create_run(_versioned(_queued("fresh"), "v1"))
        assert _get(backend, "fresh").version == "v1", "a queued run keeps its creator's version"
        created = backend.create_runs([_versioned(_queued("batch"), "v1")])
        assert list(created) == ["batch"] and _get(backend, "batch").version == "v1", (
            "create_runs stores NewRun.version too"
        )
        assert _claim_all(backend, version="v2", only=False) == {"fresh", "batch"}
        assert _get(backend, "fresh").version == "v2", (
            "a claimer with a version stamps a run it starts for the first time with it"
        )
        assert _get(backend, "fresh").started_at is not None
        _started(backend, "again", "v1")
        assert _claim_all(backend, version="v3", only=False) == {"again"}
        assert _get(backend, "again").version == "v1", (
            "a run that already started keeps the version of the code that started it"
        )
        backend.create_run(_versioned(_queued("plain"), "v1"))
        assert _claim_all(backend, version=None, only=False) == {"plain"}
        assert _get(backend, "plain").version == "v1", "a claimer without a version stamps none"
        backend.create_run(_queued("by-id"))
        claimed = backend.claim_run("by-id", owner=OTHER, lease=30, epoch=0, version="v4")
        assert claimed is not None and claimed.version == "v4", (
            "claim_run stamps a run it starts for the first time with the claimer's version"
        )
        assert _get(backend, "by-id").version == "v4"


def check_only_version_claim_next(make: MakeBackend) -> None:
    """claim_next with only_version takes runs of its version and runs of none, and
    claims past other versions' runs (started or not) ahead of them in the queue."""
    with _opened(make) as backend:
        _started(backend, "old-v1", "v1")
        _started(backend, "old-none", None)
        _started(backend, "old-v2", "v2")
        backend.create_run(_versioned(_queued("new-v1"), "v1"))
        backend.create_run(_queued("new-none"))
        claimed = _claim_all(backend, version="v2", only=True)
        assert claimed == {"old-v2", "old-none", "new-none"}, (
            "only_version claims its own version's runs and runs of no version, no others"
        )
        assert _get(backend, "new-none").version == "v2", "stamped by its first start"
        assert _get(backend, "old-none").version is None, "a run that started keeps its none"
        for run_id in ("old-v1", "new-v1"):
            assert _get(backend, run_id).status is RunStatus.QUEUED, (
                "another version's runs, started or not, stay queued for its own workers"
            )
        assert _claim_all(backend, version="v2", only=True) == set()
        assert _claim_all(backend, version="v3", only=False) == {"old-v1", "new-v1"}, (
            "without only_version every run is claimed"
        )
        assert _get(backend, "new-v1").version == "v3", "a first start stamps the claimer's"
        assert _get(backend, "old-v1").version == "v1"
        try:
            backend.claim_next(
                owner=OTHER,
                queue="default",
                workflows=["app.workflow"],
                limit=1,
                lease=30,
                only_version=True,
            )
        except ValueError:
            pass
        else:
            raise AssertionError("only_version without a version must raise ValueError")


def check_only_version_claim_run(make: MakeBackend) -> None:
    """claim_run with only_version refuses a run another version started, whatever the
    path (queued again, blocked, a dead owner's), and takes its own and new ones."""
    with _opened(make) as backend:
        _started(backend, "queued-v1", "v1")
        assert _claim_one(backend, "queued-v1", 1, "v2") is None, (
            "claim_run with only_version refuses another version's run"
        )
        assert _get(backend, "queued-v1").status is RunStatus.QUEUED
        mine = _claim_one(backend, "queued-v1", 1, "v1")
        assert mine is not None and mine.version == "v1", "its own version's run is claimed"

        backend.create_run(_versioned(_new("dead-v1"), "v1"))
        assert _claim_one(backend, "dead-v1", 1, "v2", dead_owner=OWNER) is None, (
            "a dead owner's run of another version is left to that version's workers"
        )
        taken = _claim_one(backend, "dead-v1", 1, "v1", dead_owner=OWNER)
        assert taken is not None and taken.recoveries == 1

        backend.create_run(_versioned(_new("blocked-v1"), "v1"))
        assert backend.finish_run("blocked-v1", 1, RunStatus.BLOCKED, error=b"j0")
        assert _claim_one(backend, "blocked-v1", 1, "v2") is None, (
            "nor a blocked run of another version"
        )

        backend.create_run(_versioned(_queued("new-v1"), "v1"))
        assert _claim_one(backend, "new-v1", 0, "v2") is None, (
            "a run another version created is left to it, though it never started"
        )
        backend.create_run(_queued("new-none"))
        fresh = _claim_one(backend, "new-none", 0, "v2")
        assert fresh is not None and fresh.version == "v2", (
            "a run of no version is claimed by any version, and stamped with it"
        )
        try:
            backend.claim_run("blocked-v1", owner=OTHER, lease=30, epoch=1, only_version=True)
        except ValueError:
            pass
        else:
            raise AssertionError("only_version without a version must raise ValueError")


def check_only_version_limited_queue(make: MakeBackend) -> None:
    """A queue that declares limits applies the version rule too, in both claims."""
    with _opened(make) as backend:
        backend.put_queue(Queue(name="limited", concurrency=5))
        _started(backend, "old-v1", "v1", queue="limited")
        _started(backend, "old-v2", "v2", queue="limited")
        backend.create_run(dataclasses.replace(_queued("new-v1", queue="limited"), version="v1"))
        backend.create_run(_queued("new", queue="limited"))
        claimed = _claim_all(backend, version="v2", only=True, queue="limited")
        assert claimed == {"old-v2", "new"}, "a limited queue's claim keeps to its version"
        assert _get(backend, "new").version == "v2"
        assert _claim_one(backend, "old-v1", 1, "v2") is None
        taken = _claim_one(backend, "old-v1", 1, "v1")
        assert taken is not None and taken.status is RunStatus.RUNNING


def check_list_runs_by_version(make: MakeBackend) -> None:
    """list_runs and count_runs filter by RunQuery.version."""
    with _opened(make) as backend:
        for run_id, version in (("a", "v1"), ("b", "v2"), ("c", "v1"), ("d", None)):
            backend.create_run(_versioned(_queued(run_id), version))
        listed = backend.list_runs(RunQuery(version="v1"), limit=10)
        assert sorted(run.id for run in listed) == ["a", "c"]
        assert all(run.version == "v1" for run in listed)
        assert backend.count_runs(RunQuery(version="v1")) == 2
        assert backend.count_runs(RunQuery(version="v2", statuses=(RunStatus.QUEUED,))) == 1
        assert backend.count_runs(RunQuery(version="v9")) == 0
        assert backend.count_runs(RunQuery()) == 4, "no version: every run"
