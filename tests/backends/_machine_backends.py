"""The backends the machine runs on: one memory, one SQLite and (if configured) one
PostgreSQL backend, fresh for each example.

PostgreSQL joins when DURABLE_TEST_POSTGRES_URL is set; DURABLE_REQUIRE_POSTGRES=1
makes a missing URL a failure, as everywhere in the suite.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from durable.backends import Backend, MemoryBackend
from tests.conftest import POSTGRES_URL, REQUIRE_POSTGRES, PostgresSchemas


class Backends:
    """One memory, one SQLite and (if configured) one PostgreSQL backend, all empty."""

    def __init__(self, tmp_path: Path, postgres_url: str | None, number: int) -> None:
        from durable.backends.sql import SQLBackend

        self._schemas = PostgresSchemas(postgres_url) if postgres_url else None
        self._sqlite_file = tmp_path / f"machine{number}.db"
        self.by_name: dict[str, Backend] = {}
        try:
            self.by_name["memory"] = MemoryBackend()
            # NORMAL: no fsync per commit. The same statements, in a fraction of the time.
            self.by_name["sqlite"] = SQLBackend(f"sqlite:///{self._sqlite_file}?synchronous=NORMAL")
            if self._schemas is not None:
                self.by_name["postgres"] = SQLBackend(self._schemas.new_url())
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for backend in self.by_name.values():
            backend.close()
        if self._schemas is not None:
            self._schemas.drop_all()  # the schema of this example, and its tables
        self._sqlite_file.unlink(missing_ok=True)  # shrinking makes thousands of them


def _postgres_url() -> str | None:
    if POSTGRES_URL:
        return POSTGRES_URL
    if REQUIRE_POSTGRES:
        pytest.fail("DURABLE_REQUIRE_POSTGRES=1 but DURABLE_TEST_POSTGRES_URL is not set")
    return None


def backend_factory(tmp_path: Path) -> Callable[[], Backends]:
    """A factory of fresh backend trios, one per Hypothesis example (what the
    `open_backends` fixture of the machine's test modules gives)."""
    url = _postgres_url()
    numbers = itertools.count()
    return lambda: Backends(tmp_path, url, next(numbers))
