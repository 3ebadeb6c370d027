"""The workload benchmarks/flow_control.py dispatches: one no-op task per workflow."""

from durable import task, workflow


@task
def noop(i: int) -> int:
    return i


@workflow
def one(i: int) -> int:
    return noop(i)
