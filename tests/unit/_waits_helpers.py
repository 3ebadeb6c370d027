"""Shared by the tests of durable time and events (`wait`, `send`): durations, the
`env` fixture, and the task and workflow several of them run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

import durable
from durable import task, wait, workflow
from durable.testing import DurableEnv

HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)

seen: list[object] = []


@pytest.fixture(autouse=True)
def _clean() -> None:
    seen.clear()


@pytest.fixture(name="env")
def env_fixture() -> Iterator[DurableEnv]:
    """A DurableEnv per test, as fixture `env` (a test's `env` argument does not shadow
    the imported function)."""
    with DurableEnv() as environment:
        yield environment


@task
def note(value: object) -> object:
    seen.append(value)
    return value


@workflow
def nap(hours: float) -> float:
    before = durable.now()
    wait(dt.timedelta(hours=hours))
    return (durable.now() - before).total_seconds()
