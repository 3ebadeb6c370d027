"""dispatch(connection=): the run is inserted in the caller's SQLAlchemy transaction
(the outbox pattern), on SQLite and PostgreSQL; and every refusal writes nothing."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

import durable
from durable import RunStatus, Worker
from durable.core import event_schemas
from durable.core.records import RunQuery
from durable.errors import ConfigurationError, IdempotencyConflict

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

calls: list[int] = []
_lock = threading.Lock()


@durable.workflow(name="outbox.note")
def note(n: int) -> int:
    """Remember that run n executed."""
    with _lock:
        calls.append(n)
    return n * 10


@dataclasses.dataclass
class Shipped:
    carrier: str


@durable.workflow(name="outbox.ship", events={"shipped": Shipped})
def ship() -> str:
    return durable.wait("shipped").carrier


#: the connection `spawner` tries to use (a connection is no workflow argument).
held: list[object] = []


@durable.workflow(name="outbox.spawner")
def spawner() -> None:
    """Tries dispatch(connection=) inside a workflow."""
    durable.dispatch(note, 1, connection=held[0])


def caller_url(url: str) -> str:
    """The application's own SQLAlchemy URL for durable's database: on PostgreSQL the
    psycopg driver and no search_path (durable's schema must be found anyway)."""
    if url.startswith("sqlite"):
        return url
    return url.split("?", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)


class App:
    """The application's SQLAlchemy engine on durable's database, and a table of its
    own (named afresh: PostgreSQL tests share the server's default schema)."""

    def __init__(self, url: str) -> None:
        self.db = sa.create_engine(caller_url(url))
        self.table = f"outbox_orders_{uuid.uuid4().hex[:10]}"
        with self.db.begin() as conn:
            conn.execute(sa.text(f"CREATE TABLE {self.table} (id TEXT PRIMARY KEY)"))

    def order(self, conn: sa.Connection | Session, order_id: str) -> None:
        """Insert an order in *conn*'s transaction."""
        conn.execute(sa.text(f"INSERT INTO {self.table} VALUES ('{order_id}')"))

    def orders(self) -> list[str]:
        """The committed orders."""
        with self.db.connect() as conn:
            return [row[0] for row in conn.execute(sa.text(f"SELECT id FROM {self.table}"))]

    def begin(self) -> Any:
        return self.db.begin()

    def connect(self) -> sa.Connection:
        return self.db.connect()

    def close(self) -> None:
        with self.db.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE {self.table}"))
        self.db.dispose()


@pytest.fixture
def app_db(engine: durable.Engine, url: str) -> Iterator[App]:
    """The application's database access, on durable's database."""
    calls.clear()
    app = App(url)
    yield app
    app.close()


def runs(engine: durable.Engine) -> int:
    return engine.backend.count_runs(RunQuery())


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_commit_makes_one_run_and_rollback_none(engine: durable.Engine, app_db: App) -> None:
    """A committed transaction stores its order and exactly one run, which a worker
    executes; a rolled-back one leaves neither, and nothing of it is executed."""
    with app_db.connect() as conn, conn.begin() as transaction:
        app_db.order(conn, "o-1")
        durable.dispatch(note, 1, connection=conn, id="order-1")
        transaction.rollback()  # the request failed
    with app_db.begin() as conn:
        app_db.order(conn, "o-2")
        handle = durable.dispatch(note, 2, connection=conn, id="order-2")
        assert engine.backend.get_run("order-2") is None  # not before the commit
    assert app_db.orders() == ["o-2"]
    assert [run.id for run in engine.backend.list_runs(RunQuery(), limit=10)] == ["order-2"]
    with Worker(engine, poll=0.05):
        assert handle.result(timeout=30) == 20
    assert calls == [2] and runs(engine) == 1
    assert engine.backend.get_run("order-1") is None


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_attributes_share_the_callers_transaction(engine: durable.Engine, app_db: App) -> None:
    """A run's attributes are written in the caller's transaction with it: found by them
    once committed, and gone with it on a rollback."""
    with app_db.begin() as conn:
        durable.dispatch(note, 7, connection=conn, id="order-7", attributes={"order": "o-7"})
    with app_db.connect() as conn, conn.begin() as transaction:
        durable.dispatch(note, 8, connection=conn, id="order-8", attributes={"order": "o-8"})
        transaction.rollback()
    assert durable.get("order-7").attributes() == {"order": "o-7"}
    for order, found in (("o-7", ["order-7"]), ("o-8", [])):
        query = RunQuery(attributes=(("order", order),))
        assert [run.id for run in engine.backend.list_runs(query, limit=10)] == found


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_the_declared_event_schemas_are_inserted_with_the_run(
    engine: durable.Engine, app_db: App
) -> None:
    """A run inserted in the caller's transaction stores its workflow's declared event
    schemas as any run does, so a sender without the code checks against them."""
    with app_db.begin() as conn:
        durable.dispatch(ship, connection=conn, id="ship-1")
    run = engine.backend.get_run("ship-1")
    assert run is not None
    assert run.event_schemas == event_schemas.declared_json({"shipped": Shipped})


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_orm_session(engine: durable.Engine, app_db: App) -> None:
    """An ORM Session's transaction carries the run the same way, both ways."""
    with Session(app_db.db) as session, session.begin():
        app_db.order(session, "o-3")
        durable.dispatch(note, 3, connection=session, id="order-3")
    with Session(app_db.db) as session:
        session.begin()
        durable.dispatch(note, 4, connection=session, id="order-4")
        session.rollback()
    assert engine.backend.get_run("order-3").status is RunStatus.QUEUED  # type: ignore[union-attr]
    assert engine.backend.get_run("order-4") is None and runs(engine) == 1


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_run_is_counted_created_once_its_transaction_commits(
    engine: durable.Engine, app_db: App
) -> None:
    """durable_runs_created_total counts a run inserted in the caller's transaction at
    its commit: not while it is open, not after a rollback (of the transaction, or of a
    savepoint the run was inserted in), and once for an id dispatched twice."""
    from prometheus_client import CollectorRegistry

    from durable.ops import metrics

    registry = CollectorRegistry()
    metrics.instrument(engine, registry=registry, queues=False)

    def created() -> float:
        found = registry.get_sample_value("durable_runs_created_total", {"workflow": note.name})
        return found or 0.0

    with app_db.connect() as conn, conn.begin() as transaction:
        durable.dispatch(note, 1, connection=conn, id="counted-1")
        transaction.rollback()
    assert created() == 0
    with app_db.begin() as conn:
        durable.dispatch(note, 2, connection=conn, id="counted-2")
        with conn.begin_nested() as savepoint:
            durable.dispatch(note, 3, connection=conn, id="counted-3")
            with conn.begin_nested():
                durable.dispatch(note, 4, connection=conn, id="counted-4")
            savepoint.rollback()  # 3 and 4 with it
        with conn.begin_nested():
            durable.dispatch(note, 5, connection=conn, id="counted-5")  # released: kept
        durable.dispatch(note, 2, connection=conn, id="counted-2")  # the same run again
        assert created() == 0, "counted before the commit"
    assert sorted(run.id for run in engine.backend.list_runs(RunQuery(), limit=10)) == [
        "counted-2",
        "counted-5",
    ]
    assert created() == 2
    with Session(app_db.db) as session, session.begin():
        durable.dispatch(note, 6, connection=session, id="counted-6")
    assert created() == 3


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_ids_are_idempotent_in_and_across_transactions(engine: durable.Engine, app_db: App) -> None:
    """The same id and call in one transaction, or in a later one, is the same run; the
    same id with another call is an IdempotencyConflict."""
    with app_db.begin() as conn:
        first = durable.dispatch(note, 5, connection=conn, id="order-5")
        again = durable.dispatch(note, 5, connection=conn, id="order-5")
    assert first == again
    with app_db.begin() as conn:
        assert durable.dispatch(note, 5, connection=conn, id="order-5") == first
        with pytest.raises(IdempotencyConflict):
            durable.dispatch(note, 6, connection=conn, id="order-5")
    assert runs(engine) == 1


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_closed_transaction_is_refused(engine: durable.Engine, app_db: App) -> None:
    """A Connection or Session whose transaction is closed (or never begun), or a closed
    Connection, is a ValueError saying how to open one; nothing is written."""
    with app_db.connect() as conn:
        with conn.begin():
            pass
        with pytest.raises(ValueError, match="transaction that is open"):
            durable.dispatch(note, 7, connection=conn)
    with pytest.raises(ValueError, match="is closed"):
        durable.dispatch(note, 7, connection=conn)
    with Session(app_db.db) as session, pytest.raises(ValueError, match="Session has no"):
        durable.dispatch(note, 7, connection=session)
    assert runs(engine) == 0


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_other_options_and_places_are_refused(engine: durable.Engine, app_db: App) -> None:
    """Not a connection, debounce= or key_concurrency= with it, or connection= inside a
    workflow: a TypeError each, nothing written."""
    with pytest.raises(TypeError, match="SQLAlchemy Connection or ORM Session"):
        durable.dispatch(note, 8, connection="postgresql://elsewhere")
    with app_db.begin() as conn:
        with pytest.raises(TypeError, match="debounce"):
            durable.dispatch(note, 8, connection=conn, key="k", debounce=5)
        with pytest.raises(TypeError, match="key_concurrency"):
            durable.dispatch(note, 8, connection=conn, key="k", key_concurrency=1)
    assert runs(engine) == 0
    with app_db.begin() as conn:
        held[:] = [conn]
        with pytest.raises(TypeError, match="application code"):
            durable.execute(spawner)
    assert calls == []


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_another_sqlite_file_is_refused(engine: durable.Engine, tmp_path: object) -> None:
    """A connection to another SQLite file (or an in-memory one) is a ConfigurationError
    naming both databases; nothing is written to either."""
    for other in (f"sqlite:///{tmp_path}/other.db", "sqlite://"):
        caller = sa.create_engine(other)
        with caller.begin() as conn, pytest.raises(ConfigurationError, match="same file"):
            durable.dispatch(note, 9, connection=conn)
        caller.dispose()
    assert runs(engine) == 0


@pytest.mark.postgres
@pytest.mark.parametrize("url", ["postgres"], indirect=True)
def test_another_postgres_database_is_refused(engine: durable.Engine, url: str) -> None:
    """A connection to another database of the same server is a ConfigurationError that
    names both; nothing is written."""
    base = caller_url(url)
    other = sa.create_engine(base.rsplit("/", 1)[0] + "/postgres")
    with other.begin() as conn, pytest.raises(ConfigurationError, match="same server and"):
        durable.dispatch(note, 10, connection=conn)
    other.dispose()
    assert runs(engine) == 0


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_the_memory_backend_refuses(engine: durable.Engine, tmp_path: object) -> None:
    """The memory backend has no transaction to share: a ConfigurationError."""
    caller = sa.create_engine(f"sqlite:///{tmp_path}/app.db")
    with caller.begin() as conn, pytest.raises(ConfigurationError, match="memory backend"):
        durable.dispatch(note, 11, connection=conn)
    caller.dispose()
    assert runs(engine) == 0


def test_a_parameter_named_connection_must_be_bound(memory_engine: durable.Engine) -> None:
    """connection= is a dispatch option now: a workflow's own parameter of that name is
    passed through a bound call, as for every option."""

    @durable.workflow(name="outbox.takes_connection")
    def takes(connection: str) -> str:
        return connection

    with pytest.raises(TypeError, match="bound call"):
        durable.dispatch(takes, connection="dsn")
    handle = durable.dispatch(takes.bind(connection="dsn"))
    assert handle.status() is RunStatus.QUEUED


@pytest.mark.postgres
@pytest.mark.parametrize("url", ["postgres"], indirect=True)
def test_postgres_workers_hear_of_the_run_at_the_commit(
    engine: durable.Engine, app_db: App, url: str
) -> None:
    """On PostgreSQL the insert's NOTIFY is part of the caller's transaction: a process
    listening hears nothing while it is open or after a rollback, and hears the queue's
    topic once it commits."""
    with durable.Engine(url) as other:  # another engine: its own LISTEN connection
        watch = other.backend.watch(["queue:outbox"])
        assert watch.wait(10), "the listener announces itself once it listens"
        with app_db.connect() as conn, conn.begin() as transaction:
            durable.dispatch(note, 12, connection=conn, queue="outbox")
            assert not watch.wait(0.5), "notified before the commit"
            transaction.rollback()
        assert not watch.wait(0.5), "notified of a rolled-back run"
        with app_db.begin() as conn:
            durable.dispatch(note, 13, connection=conn, queue="outbox")
            assert not watch.wait(0.5), "notified before the commit"
        assert watch.wait(10), "not notified at the commit"
