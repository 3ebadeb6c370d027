"""Fault points: how they are armed, and that an armed one fires once, where it should."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durable
from durable import StepStatus, task, workflow
from durable.core.faults import parse
from durable.errors import ConfigurationError
from durable.testing import FAULT_POINTS, InjectedFault, arm_fault, disarm_faults

calls: list[int] = []


@task(retry=dict(attempts=1))
def counted(n: int) -> int:
    calls.append(n)
    return n


@workflow
def two_tasks() -> list[int]:
    return [counted(1), counted(2)]


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    calls.clear()
    yield
    disarm_faults()


def test_both_spellings_of_durable_faults_parse() -> None:
    short = parse("before_task=exit, after_claim=sleep:0.5")
    assert [(f.point, f.action) for f in short] == [
        ("before_task", "exit"),
        ("after_claim", "sleep:0.5"),
    ]
    (long,) = parse(
        '[{"point": "before_checkpoint", "action": "stop", "match": "sleep", "nth": 2}]'
    )
    assert (long.point, long.action, long.match, long.nth) == (
        "before_checkpoint",
        "stop",
        "sleep",
        2,
    )
    assert parse("  ") == []


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("before_tsk=exit", "Unknown fault point 'before_tsk'"),
        ("before_task=explode", "Unknown fault action 'explode'"),
        ("before_task=sleep:soon", "Unknown fault action 'sleep:soon'"),
        ("before_task", "is not point=action"),
        ('[{"point": "before_task"}]', "not a list of faults"),
    ],
)
def test_a_mistyped_fault_is_an_error_that_lists_the_choices(spec: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says.replace("(", r"\(")):
        parse(spec)


def test_every_documented_point_is_a_point() -> None:
    assert set(FAULT_POINTS) == {
        "after_claim",
        "before_task",
        "after_task",
        "before_checkpoint",
        "checkpoint_lost_ack",
        "before_complete",
        "dispatch_lost_ack",
        "before_continue",
        "after_continue",
        "continue_lost_ack",
    }


def test_an_armed_point_fires_once_at_its_nth_matching_hit(memory_engine: durable.Engine) -> None:
    """The second task body is refused (raise, no retries), the first is not; after
    firing, the fault is spent and the same call succeeds."""
    arm_fault("before_task", "raise", match="counted", nth=2)
    with pytest.raises(InjectedFault, match="before_task"):
        durable.execute(two_tasks, id="first")
    assert calls == [1]
    assert durable.execute(two_tasks, id="second") == [1, 2]
    assert calls == [1, 1, 2]


def test_a_fault_before_the_checkpoint_leaves_the_step_unrecorded(
    memory_engine: durable.Engine,
) -> None:
    arm_fault("before_checkpoint", "raise", match="task:")
    with pytest.raises(InjectedFault):
        durable.execute(two_tasks, id="r")
    assert calls == [1]  # the body ran...
    (started,) = memory_engine.backend.load_history("r")  # ...and only its start is recorded
    assert started.status is StepStatus.RUNNING and started.output is None
