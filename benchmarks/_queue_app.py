"""The workload benchmarks/queue.py dispatches and its worker processes run."""

from durable import task, workflow


@task
def noop(i: int) -> int:
    return i


@workflow
def noop3(i: int) -> int:
    return noop(i) + noop(i) + noop(i)
