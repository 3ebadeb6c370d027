"""Fixtures of the backend tests: `two_databases` for the migration tests
(test_migrations.py, test_migrations_tallies.py), `open_backends` for the state machine
and the sequences it found (test_state_machine.py, test_replayed_*.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.backends._machine_backends import Backends, backend_factory
from tests.backends._migration_db import Database
from tests.conftest import PostgresSchemas


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def two_databases(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Two empty databases of one kind."""
    if request.param == "sqlite":
        yield (
            Database("sqlite", f"sqlite:///{tmp_path / 'old.db'}"),
            Database("sqlite", f"sqlite:///{tmp_path / 'new.db'}"),
        )
        return
    schemas: PostgresSchemas = request.getfixturevalue("pg_schemas")
    yield Database("postgres", schemas.new_url()), Database("postgres", schemas.new_url())


@pytest.fixture
def open_backends(tmp_path: Path) -> Callable[[], Backends]:
    """A factory of fresh backend trios, one per Hypothesis example."""
    return backend_factory(tmp_path)
