"""Shared fixtures: backends of every kind, each test on its own database or schema.

PostgreSQL tests read DURABLE_TEST_POSTGRES_URL. Without it they skip locally; CI sets
it (and DURABLE_REQUIRE_POSTGRES=1, which turns a skip into a failure), so there they
always run.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import durable
from durable.backends import Backend, MemoryBackend
from durable.runtime.defaults import configure
from tests.e2e.harness import Children

POSTGRES_URL = os.environ.get("DURABLE_TEST_POSTGRES_URL")
REQUIRE_POSTGRES = os.environ.get("DURABLE_REQUIRE_POSTGRES") == "1"


def _need_postgres() -> str:
    if POSTGRES_URL:
        return POSTGRES_URL
    if REQUIRE_POSTGRES:
        pytest.fail("DURABLE_REQUIRE_POSTGRES=1 but DURABLE_TEST_POSTGRES_URL is not set")
    pytest.skip("set DURABLE_TEST_POSTGRES_URL to run PostgreSQL tests")


class PostgresSchemas:
    """Creates throw-away schemas on the test server and URLs that select them."""

    def __init__(self, base_url: str) -> None:
        import psycopg

        self.base_url = base_url
        self._conn = psycopg.connect(
            base_url.replace("postgresql+psycopg", "postgresql"), autocommit=True
        )
        self._made: list[str] = []

    def new_url(self) -> str:
        schema = f"durable_test_{uuid.uuid4().hex[:12]}"
        self._conn.execute(f'CREATE SCHEMA "{schema}"')
        self._made.append(schema)
        separator = "&" if "?" in self.base_url else "?"
        return f"{self.base_url}{separator}options=-csearch_path%3D{schema}"

    def drop_all(self) -> None:
        for schema in self._made:
            self._conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        self._conn.close()


@pytest.fixture
def pg_schemas() -> Iterator[PostgresSchemas]:
    """Throw-away PostgreSQL schemas, dropped after the test."""
    schemas = PostgresSchemas(_need_postgres())
    try:
        yield schemas
    finally:
        schemas.drop_all()


@pytest.fixture
def pg_url(pg_schemas: PostgresSchemas) -> str:
    """A PostgreSQL URL whose tables live in a fresh schema."""
    return pg_schemas.new_url()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite URL for a fresh file."""
    return f"sqlite:///{tmp_path / 'durable.db'}"


BACKENDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def make_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Backend]]:
    """A factory of fresh, empty backends of the kind the test is parametrized with."""
    kind = request.param
    made: list[Backend] = []
    counter = itertools.count()
    schemas = PostgresSchemas(_need_postgres()) if kind == "postgres" else None

    def make() -> Backend:
        from durable.backends.sql import SQLBackend

        if kind == "memory":
            backend: Backend = MemoryBackend()
        elif schemas is None:
            backend = SQLBackend(f"sqlite:///{tmp_path / f'db{next(counter)}.sqlite'}")
        else:
            backend = SQLBackend(schemas.new_url())
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()
    if schemas is not None:
        schemas.drop_all()


@pytest.fixture
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL of the kind the test is parametrized with (memory/sqlite/postgres)."""
    kind = request.param
    if kind == "memory":
        yield "memory://"
    elif kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'durable.db'}"
    else:
        schemas = PostgresSchemas(_need_postgres())
        try:
            yield schemas.new_url()
        finally:
            schemas.drop_all()


@pytest.fixture
def children(tmp_path: Path, url: str) -> Iterator[Children]:
    """Child processes (workers, crashing apps) on the test's database, with the files
    they share with it; all killed and reaped afterwards (tests/e2e/harness.py)."""
    harness = Children(tmp_path, url)
    try:
        yield harness
    finally:
        harness.close()


@pytest.fixture
def engine(url: str) -> Iterator[durable.Engine]:
    """The default engine, configured on the parametrized database for this test."""
    engine = configure(url, lease=5.0)
    try:
        yield engine
    finally:
        engine.close()


@pytest.fixture
def memory_engine() -> Iterator[durable.Engine]:
    """The default engine on a fresh in-memory backend."""
    engine = configure("memory://", lease=5.0)
    try:
        yield engine
    finally:
        engine.close()
