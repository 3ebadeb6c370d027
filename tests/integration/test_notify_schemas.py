"""PostgreSQL notifications are scoped to the schema durable's tables are in: two
deployments in two schemas of one database do not wake each other's workers, waiters
or dashboards, and ``public`` keeps the channel every earlier version used."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

import durable
from durable.backends._statements.base import CHANNEL, CHANNEL_SQL
from tests.conftest import PostgresSchemas, _need_postgres

pytestmark = pytest.mark.postgres


@durable.workflow(name="notify_schemas.noop")
def noop(n: int) -> int:
    return n


@pytest.fixture
def admin() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(_need_postgres(), autocommit=True) as conn:
        yield conn


def _channel_of(conn: psycopg.Connection[tuple[object, ...]], schema: str) -> str:
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    row = conn.execute(f"SELECT {CHANNEL_SQL}").fetchone()
    assert row is not None
    return str(row[0])


def test_each_schema_has_its_channel(admin: psycopg.Connection[tuple[object, ...]]) -> None:
    """``public`` keeps ``durable``; another schema gets ``durable:<schema>``, or the md5
    of its name where the name would make the channel longer than PostgreSQL allows
    (63 bytes); pg_notify accepts every one."""
    tag = uuid.uuid4().hex[:8]
    short = f"notify_{tag}"
    long = f"notify_{tag}_" + "x" * 45  # 61 bytes: "durable:" + it would be 69
    wide = f"n{tag}_" + "é" * 25  # 60 bytes in 35 characters
    made = [short, long, wide]
    try:
        for schema in made:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        assert _channel_of(admin, "public") == CHANNEL
        assert _channel_of(admin, short) == f"{CHANNEL}:{short}"
        seen = {_channel_of(admin, schema) for schema in made}
        assert len(seen) == 3, "two schemas share a channel"
        for schema in (long, wide):
            channel = _channel_of(admin, schema)
            assert channel.startswith(f"{CHANNEL}:") and len(channel.encode()) <= 63
            assert schema not in channel
        for channel in seen:
            admin.execute("SELECT pg_notify(%s, 'probe')", (channel,))
    finally:
        admin.execute("SET search_path TO public")
        for schema in made:
            admin.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            )


def test_two_deployments_in_one_database_do_not_wake_each_other(
    pg_schemas: PostgresSchemas,
) -> None:
    """A run queued in schema B wakes no one watching schema A's queue of the same name;
    one queued by another process's engine on schema A does (through LISTEN)."""
    url_a, url_b = pg_schemas.new_url(), pg_schemas.new_url()
    with (
        durable.Engine(url_a) as watching,
        durable.Engine(url_a) as neighbour,
        durable.Engine(url_b) as stranger,
    ):
        watch = watching.backend.watch(["queue:shared"])
        assert watch.wait(10), "the listener announces itself once it listens"
        for n in range(3):
            stranger.dispatch_call(noop.bind(n), queue="shared")
        assert not watch.wait(1.0), "woken by a run of another schema"
        neighbour.dispatch_call(noop.bind(9), queue="shared")
        assert watch.wait(10), "not woken by a run of its own schema"
