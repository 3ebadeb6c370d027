"""What the state machine found about flow control: queue limits, key limits, rates and
key rates in the claim, replayed on every backend; and the differences it found between
memory and SQL (a lowered rate, a coalesced key limit, a known id with a key limit),
pinned on every backend."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from durable.backends import Backend
from durable.core.queues import Queue
from durable.core.records import NewRun, RunStatus
from tests.backends._machine_answers import _created
from tests.backends._machine_backends import Backends
from tests.backends._machine_replay import _replay, _running
from tests.backends._machine_strategies import OWNERS, WORKFLOWS
from tests.backends._model_records import FAR, LEASE, PER, RUN_IDS


def test_queue_limits_key_limits_and_a_rate_in_the_claim(
    open_backends: Callable[[], Backends],
) -> None:
    """A queue of two slots, one run per key and two first starts an hour: a claim
    passes over the second run of a key, takes two first starts and stops; a full queue
    claims nothing; a freed slot is not a new start; a rate raised lets one more in."""
    dumps = _replay(
        open_backends,
        lambda m: m.limits(declare=True, concurrency=2, key_concurrency=1, rate=2),
        lambda m: m.family(
            owners=(None, None, None),
            parent_of_r2=None,
            queue="default",
            priority=0,
            keys=("k1", "k1", None),
        ),
        lambda m: m.burst(queue="default", plan=[("k2", None, 0), (None, None, 0)] * 3),
        lambda m: m.claim_next(owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=3),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=3),
        lambda m: m.finish(run_id="r0", shift=0, status=RunStatus.COMPLETED, with_step=False),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=3),
        lambda m: m.declare("default", 2, 1, 3),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=3),
    )
    for name, dump in dumps.items():
        status = {run_id: run.status for run_id, run in dump.runs.items() if run is not None}
        running = sorted(run_id for run_id, s in status.items() if s is RunStatus.RUNNING)
        assert running == ["r1", "r2"], (name, status)
        assert dump.next_start["default"] == "later", name


def test_a_key_rate_in_the_claim(open_backends: Callable[[], Backends]) -> None:
    """One first start per key an hour: a claim takes the first run of each key and
    the runs without one; a finished run's start still counts; a key rate raised lets
    one more run of each key in."""
    dumps = _replay(
        open_backends,
        lambda m: m.limits(
            declare=True, concurrency=None, key_concurrency=None, rate=None, key_rate=1
        ),
        lambda m: m.family(
            owners=(None, None, None),
            parent_of_r2=None,
            queue="default",
            priority=0,
            keys=("k1", "k1", None),
        ),
        lambda m: m.burst(queue="default", plan=[("k2", None, 0)] * 3),
        lambda m: m.claim_next(owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=9),
        lambda m: _running(m, ["r0", "r2", "r3"]),  # (each step: every backend as the model)
        lambda m: m.finish(run_id="r0", shift=0, status=RunStatus.COMPLETED, with_step=False),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=9),
        lambda m: _running(m, ["r2", "r3"]),
        lambda m: m.declare("default", None, None, None, 2),
        lambda m: m.claim_next(owner=OWNERS[1], queue="default", workflows=WORKFLOWS, limit=9),
    )
    for name, dump in dumps.items():
        status = {run_id: run.status for run_id, run in dump.runs.items() if run is not None}
        running = sorted(run_id for run_id, s in status.items() if s is RunStatus.RUNNING)
        assert running == ["r1", "r2", "r3", "r4"], (name, status)


# -- differences the machine found between memory and SQL, fixed -----------------------


def _new(run_id: str, **fields: object) -> NewRun:
    return NewRun(
        id=run_id, workflow="wf.a", input=b"j[1]", call_hash="v1:1", owner=None, lease=LEASE,
        **fields,  # type: ignore[arg-type]
    )  # fmt: skip


def _claim(backend: Backend) -> list[str]:
    claimed = backend.claim_next(
        owner=OWNERS[0], queue="default", workflows=WORKFLOWS, limit=3, lease=LEASE
    )
    return [run.id for run in claimed]


def _lowered_rate(backend: Backend) -> object:
    """Three starts under a rate of 3; the rate lowered to 1; a claim that starts
    nothing; the rate raised to 3 again: the hour holds three starts, so none may
    start. Memory's claim used to trim the log to the lowered rate even when it started
    nothing; the log is written only when a run starts."""
    backend.put_queue(Queue(name="default", rate=3, per=PER))
    for run_id in RUN_IDS[:4]:
        _created(backend, backend.create_run(_new(run_id)))
    first = _claim(backend)
    backend.put_queue(Queue(name="default", rate=1, per=PER))
    _claim(backend)
    backend.put_queue(Queue(name="default", rate=3, per=PER))
    return first, _claim(backend)


def _coalesced_key_limit(backend: Backend) -> object:
    """A debounced run coalesced with a key limit of its own gives its queue a row
    (claims then enforce the limit); memory used to only when the call created the run,
    and with one run of the key running its claim took the run past its limit of 1."""
    backend.debounce_run(_new("r0", key="k1"), window=FAR, longest=2 * FAR)
    backend.create_run(dataclasses.replace(_new("r1", key="k1"), owner=OWNERS[1]))
    backend.debounce_run(_new("r2", key="k1", key_limit=1), window=FAR, longest=2 * FAR)
    backend.cancel_run("r0")  # queued (with the request), never started
    return backend.get_queue("default"), _claim(backend)


def _known_id_with_a_key_limit(backend: Backend) -> object:
    """create_run of a known id returns the stored run; the named queue gets its row
    when the call carries a key limit, as SQL writes it before it finds the id taken."""
    backend.create_run(_new("r0"))
    backend.create_run(_new("r0", queue="mail", key="k1", key_limit=1))
    return list(backend.list_queues())


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (_lowered_rate, (["r0", "r1", "r2"], [])),
        (_coalesced_key_limit, (Queue(name="default"), [])),
        (_known_id_with_a_key_limit, [Queue(name="mail")]),
    ],
)
def test_flow_control_agrees(
    open_backends: Callable[[], Backends], scenario: Callable[[Backend], object], expected: object
) -> None:
    """Each backend gives *expected* (SQL's answer) at the end of *scenario*."""
    backends = open_backends()
    try:
        answers = {name: scenario(backend) for name, backend in backends.by_name.items()}
    finally:
        backends.close()
    assert all(got == expected for got in answers.values()), answers
