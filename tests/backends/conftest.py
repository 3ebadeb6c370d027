"""The `two_databases` fixture of the migration tests (test_migrations.py,
test_migrations_tallies.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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
