"""Shared by the tests of tasks as activities (issue 14): the `clock` fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durable
from tests.unit.helpers import FakeClock


@pytest.fixture(name="clock")
def clock_fixture() -> Iterator[FakeClock]:
    """A default engine on memory whose clock moves only when a test sleeps on it (the
    fixture `clock`: a test's `clock` argument does not shadow the imported function)."""
    fake = FakeClock()
    engine = durable.configure("memory://", clock=fake)
    try:
        yield fake
    finally:
        engine.close()
