"""durable.info(): where the calling code runs, in a task body, a workflow, or neither."""

from __future__ import annotations

import pytest

import durable
from durable import RunInfo, dispatch, execute, task, workflow

pytestmark = pytest.mark.usefixtures("memory_engine")

seen: list[RunInfo | None] = []


@task(retry=dict(attempts=2, initial=0.0))
def report(fail_first: bool) -> None:
    me = durable.info()
    seen.append(me)
    if fail_first and me is not None and me.attempt == 1:
        raise RuntimeError("first attempt fails")


@workflow
def inner() -> None:
    seen.append(durable.info())
    report(True)


@workflow
def outer() -> None:
    report(False)
    inner()


def test_info_names_the_run_the_task_and_the_attempt() -> None:
    seen.clear()
    execute(outer, id="o1")
    name = report.name
    assert seen == [
        RunInfo(run_id="o1", workflow=outer.name, parent_id=None, task=name, position=0,
                attempt=1),
        RunInfo(run_id="o1/1", workflow=inner.name, parent_id="o1"),
        RunInfo(run_id="o1/1", workflow=inner.name, parent_id="o1", task=name, position=0,
                attempt=1),
        RunInfo(run_id="o1/1", workflow=inner.name, parent_id="o1", task=name, position=0,
                attempt=2),
    ]  # fmt: skip


def test_info_in_a_task_run_on_its_own_and_outside_any_run(memory_engine: durable.Engine) -> None:
    seen.clear()
    handle = dispatch(report, False)
    with durable.Worker(memory_engine, poll=0.02):
        handle.result(timeout=5)
    assert seen == [
        RunInfo(run_id=handle.id, workflow=report.name, parent_id=None, task=report.name,
                position=0, attempt=1)
    ]  # fmt: skip
    report(False)  # a plain call: no run around it
    assert seen[-1] is None
    assert durable.info() is None
