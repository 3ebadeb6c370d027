"""Workflows for the bad-row tests, importable by a `durable worker` subprocess too."""

from __future__ import annotations

from durable import task, wait, workflow


@task
def fetch(name: str) -> str:
    return f"fetched {name}"


@task
def produce(size: int) -> str:
    return "x" * size


@workflow
def greet(name: str) -> str:
    return f"hello {name}"


@workflow
def two_phase(name: str) -> str:
    """A task, then a wait for the event ``go``: its recorded output is replayed after."""
    first = fetch(name)
    wait("go")
    return first


@workflow
def echo_big(value: str) -> str:
    """Takes a large input, records a large task output, returns a large result."""
    made = produce(len(value))
    assert made == value
    return made
