"""The engine on real SQLite files and PostgreSQL: resume, corrupt rows, schema versions."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import Any

import pytest

import durable
from durable import RunStatus, execute, task, workflow
from durable.errors import ConfigurationError, PayloadError
from tests.unit.helpers import Crash

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

bodies: list[str] = []
crash_on: set[str] = set()


@task
def act(name: str) -> str:
    if name in crash_on:
        crash_on.discard(name)
        raise Crash
    bodies.append(name)
    return name.upper()


@workflow
def three(tag: str) -> list[str]:
    return [act(f"{tag}-1"), act(f"{tag}-2"), act(f"{tag}-3")]


@pytest.fixture(autouse=True)
def _reset() -> None:
    bodies.clear()
    crash_on.clear()


def execute_sql(url: str, statement: str, *params: Any) -> None:
    """Run raw SQL against the test database (to corrupt rows on purpose)."""
    if url.startswith("sqlite"):
        # closing(): sqlite3's own context manager commits but leaves the file open.
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn, conn:
            conn.execute(statement, params)
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement.replace("?", "%s"), params)


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_new_engine_resumes_a_run_left_by_another(url: str) -> None:
    """A run abandoned by one engine is finished by a fresh one, replaying its steps."""
    crash_on.add("a-3")
    first = durable.configure(url, lease=60)
    with pytest.raises(Crash):
        execute(three, "a", id="handover")
    first.close()
    second = durable.configure(url, lease=60)
    try:
        assert execute(three, "a", id="handover") == ["A-1", "A-2", "A-3"]
        assert bodies == ["a-1", "a-2", "a-3"]
        stored = second.backend.get_run("handover")
        assert stored is not None and stored.status is RunStatus.COMPLETED and stored.epoch == 2
    finally:
        second.close()


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_corrupt_history_row_fails_only_its_run(url: str) -> None:
    """An unreadable recorded output fails that run with PayloadError; others complete."""
    engine = durable.configure(url, lease=60)
    try:
        crash_on.update({"bad-3", "good-3"})
        for tag in ("bad", "good"):
            with pytest.raises(Crash):
                execute(three, tag, id=tag)
        execute_sql(
            url,
            "UPDATE durable_history SET output = ? WHERE run_id = 'bad' AND position = 1",
            b"j{trunc",
        )
        assert sorted(durable.recover()) == ["bad", "good"]
        bad = engine.backend.get_run("bad")
        good = engine.backend.get_run("good")
        assert bad is not None and bad.status is RunStatus.FAILED
        assert good is not None and good.status is RunStatus.COMPLETED
        with pytest.raises(PayloadError) as caught:
            execute(three, "bad", id="bad")
        assert caught.value.run_id == "bad" and caught.value.position == 1
        assert "corrupt" in str(caught.value)
        assert execute(three, "good", id="good") == ["GOOD-1", "GOOD-2", "GOOD-3"]
    finally:
        engine.close()


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_corrupt_run_input_fails_the_run(url: str) -> None:
    """A run whose stored input cannot be read fails with PayloadError when resumed."""
    engine = durable.configure(url, lease=60)
    try:
        crash_on.add("in-1")
        with pytest.raises(Crash):
            execute(three, "in", id="bad-input")
        execute_sql(url, "UPDATE durable_runs SET input = ? WHERE id = 'bad-input'", b"\x00garbage")
        assert durable.recover() == ["bad-input"]
        stored = engine.backend.get_run("bad-input")
        assert stored is not None and stored.status is RunStatus.FAILED
        with pytest.raises(PayloadError, match="not a durable payload"):
            execute(three, "in", id="bad-input")
    finally:
        engine.close()


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_newer_schema_is_refused(url: str) -> None:
    """A database written by a newer durable is refused, not modified."""
    durable.Engine(url).close()
    execute_sql(url, "UPDATE durable_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(ConfigurationError, match="schema version 99"):
        durable.Engine(url)


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_schema_is_created_once_and_reused(url: str) -> None:
    """Opening the same database twice keeps its data and schema version."""
    engine = durable.configure(url)
    assert execute(three, "s", id="kept") == ["S-1", "S-2", "S-3"]
    engine.close()
    engine = durable.configure(url)
    try:
        assert execute(three, "s", id="kept") == ["S-1", "S-2", "S-3"]
        assert bodies == ["s-1", "s-2", "s-3"]
    finally:
        engine.close()
