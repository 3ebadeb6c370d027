"""`installed`: the engine a web test module's `world` fixture serves, on SQLite or on a
fresh PostgreSQL schema, made the default engine while it is open."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import durable
from durable.runtime.defaults import swap
from tests.conftest import PostgresSchemas, _need_postgres


@contextlib.contextmanager
def installed(kind: str, folder: Path, *, lease: float = 5.0) -> Iterator[durable.Engine]:
    """An engine on ``folder/d.db`` (*kind* "sqlite") or a new PostgreSQL schema
    ("postgres"), the default engine until the block ends; then the previous default
    is put back, the engine closed and the schema dropped."""
    schemas = PostgresSchemas(_need_postgres()) if kind == "postgres" else None
    url = schemas.new_url() if schemas else f"sqlite:///{folder / 'd.db'}"
    engine = durable.Engine(url, lease=lease)
    previous = swap(engine)
    try:
        yield engine
    finally:
        swap(previous)
        engine.close()
        if schemas is not None:
            schemas.drop_all()
