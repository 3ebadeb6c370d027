"""What the state machine found about creating and claiming runs, replayed on every
backend: a known id keeps its stored parent and priority, and claims by code version."""

from __future__ import annotations

from collections.abc import Callable

from durable.core.records import RunStatus
from durable.core.run_options import PRIORITY_MAX, PRIORITY_MIN
from tests.backends._backend_machine import BackendMachine
from tests.backends._machine_backends import Backends
from tests.backends._machine_replay import _replay, _running
from tests.backends._machine_strategies import OWNERS, WORKFLOWS


def test_create_returns_the_stored_parent_and_priority(
    open_backends: Callable[[], Backends],
) -> None:
    """A known id comes back with its stored parent (none, here) and its int4-limit
    priority, though the second create names a parent and another priority."""
    dumps = _replay(
        open_backends,
        lambda m: m.family(
            owners=(None, None, None), parent_of_r2=None, queue="default", priority=PRIORITY_MAX
        ),
        lambda m: m.create(
            run_id="r2",
            owner=None,
            queue="default",
            priority=PRIORITY_MIN,
            workflow="wf.a",
            same_call=True,
            parent="r0",
        ),
        lambda m: m.claim_next(owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=3),
    )
    for name, dump in dumps.items():
        r1, r2 = dump.runs["r1"], dump.runs["r2"]
        assert r1 is not None and r2 is not None
        assert (r2.parent, r2.priority) == (None, 0), name
        assert (r1.parent, r1.priority, r1.status) == ("r0", PRIORITY_MAX, RunStatus.RUNNING), name


def test_only_version_claims(open_backends: Callable[[], Backends]) -> None:
    """A claimer serving only v1 takes runs of v1 or of no version (stamping these)
    and passes over a v2 run; a claimer of any version takes it, and stamps its own."""

    def create(run_id: str, version: str) -> Callable[[BackendMachine], object]:
        return lambda m: m.create(
            run_id=run_id,
            owner=None,
            queue="default",
            priority=0,
            workflow="wf.a",
            same_call=True,
            parent=None,
            version=version,
        )

    dumps = _replay(
        open_backends,
        lambda m: m.family(owners=(None, None, None), parent_of_r2=None, queue="mail", priority=0),
        create("r3", "v2"),
        create("r4", "v1"),
        lambda m: m.claim_next(
            owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=3, version="v1", only=True
        ),
        lambda m: m.claim_run(
            run_id="r3", owner=OWNERS[0], shift=0, dead="nobody", version="v1", only=True
        ),
        lambda m: _running(m, ["r0", "r2", "r4"]),
        lambda m: m.claim_run(run_id="r3", owner=OWNERS[1], shift=0, dead="nobody", version="v1"),
    )
    for name, dump in dumps.items():
        versions = {i: (r.status, r.version) for i, r in dump.runs.items() if r is not None}
        running = (RunStatus.RUNNING, "v1")
        assert versions == {
            "r0": running, "r1": (RunStatus.QUEUED, None), "r2": running, "r3": running,
            "r4": running,
        }, name  # fmt: skip
