"""durable's pytest plugin (registered through the ``pytest11`` entry point).

It adds one fixture, ``durable_env``: a fresh `DurableEnv`, installed as the default
engine for the test and closed after it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from durable.testing._env import DurableEnv


@pytest.fixture
def durable_env() -> Iterator[DurableEnv]:
    """A DurableEnv (memory backend, virtual clock, inline worker) for this test."""
    with DurableEnv() as env:
        yield env
