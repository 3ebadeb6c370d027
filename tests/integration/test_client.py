"""durable.Client: runs started by name, the same rows as the REST API's start, JSON
only, and the default engine left alone (the process without the code is
tests/e2e/test_client.py)."""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable import Client, RunStatus, Worker
from durable.core.records import RunQuery
from durable.errors import ConfigurationError, IdempotencyConflict, RunNotFound, SerializationError
from durable.ops import Operations
from durable.runtime import defaults

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@durable.workflow(name="client.greet")
def greet(name: str, *, punctuation: str = "!") -> str:
    """A greeting."""
    return f"hello {name}{punctuation}"


@pytest.fixture
def client(url: str) -> Iterator[Client]:
    with Client(url) as made:
        yield made


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_run_started_by_name_runs_on_a_worker(client: Client, url: str) -> None:
    """Client.dispatch by name queues the run; a worker that knows the name runs it with
    the positional and keyword arguments given; get(id) reads status, result, state."""
    handle = client.dispatch("client.greet", "ada", punctuation="?", id="greet-1", priority=3)
    assert handle.status() is RunStatus.QUEUED
    with durable.Engine(url) as engine, Worker(engine, poll=0.05):
        assert client.get("greet-1").result(timeout=30) == "hello ada?"
    found = client.get("greet-1")
    assert found.status() is RunStatus.COMPLETED and found.state() == {}
    assert found.run().priority == 3


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_client_and_rest_store_the_same_run(client: Client, url: str) -> None:
    """The REST API's start (Operations.start) and Client.dispatch go the same way: the
    same stored workflow, input and call hash, so each joins the other's run by id."""
    with durable.Engine(url) as engine:
        ops = Operations(engine)
        rest = ops.start("client.greet", ["bob"], {"punctuation": "."}, id="same-1", queue="q")
        mine = client.dispatch("client.greet", "bob", punctuation=".", queue="q", id="same-2")
        a, b = engine.reread(rest["id"]), mine.run()
        assert (a.workflow, a.input, a.call_hash, a.queue) == (
            b.workflow,
            b.input,
            b.call_hash,
            b.queue,
        )
        again = client.dispatch("client.greet", "bob", punctuation=".", queue="q", id="same-1")
        assert again.id == "same-1"
        assert ops.start("client.greet", ["bob"], {"punctuation": "."}, id="same-2")["id"] == (
            "same-2"
        )
        assert engine.backend.count_runs(RunQuery()) == 2


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_client_ids_are_idempotent(client: Client) -> None:
    """The same id with the same arguments is the same run; with others, a conflict."""
    first = client.dispatch("client.greet", "cy", id="idem-1")
    assert client.dispatch("client.greet", "cy", id="idem-1") == first
    with pytest.raises(IdempotencyConflict):
        client.dispatch("client.greet", "dee", id="idem-1")
    assert [run.id for run in client.list_runs()] == ["idem-1"]


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_bad_input_writes_nothing(client: Client) -> None:
    """Arguments JSON cannot express (a client never pickles), arguments that do not fit
    the function registered here, a name that is not text: clear errors, no run."""
    with pytest.raises(SerializationError, match="never pickles") as caught:
        client.dispatch("client.greet", threading.Lock())
    assert "lock" in caught.value.type_name
    with pytest.raises(SerializationError, match="never pickles"):
        client.dispatch("elsewhere.flow", lambda: 1)
    with pytest.raises(TypeError, match="greet"):
        client.dispatch("client.greet", "a", "b", "c")
    with pytest.raises(TypeError, match="workflow name"):
        client.dispatch(greet, "a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="child"):
        client.dispatch("client.greet", "a", id="parent/3")
    assert client.list_runs() == []


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_attributes_are_stored_and_found_by_the_listing(client: Client) -> None:
    """attributes= of a start by name are the run's, and list_runs filters by them as
    ``durable ls --attr`` does; a bad one is refused and nothing is written."""
    client.dispatch("client.greet", "a", id="attr-a", attributes={"customer": "c-42", "n": 5})
    client.dispatch("client.greet", "b", id="attr-b", attributes={"customer": "c-7"})
    assert client.get("attr-a").attributes() == {"customer": "c-42", "n": 5}
    assert [r.id for r in client.list_runs(attributes={"customer": "c-42"})] == ["attr-a"]
    assert [r.id for r in client.list_runs(attributes={"n": "5"})] == ["attr-a"]
    assert client.list_runs(attributes={"customer": "c-42", "n": 6}) == []
    with pytest.raises(TypeError, match="customer"):
        client.dispatch("client.greet", "c", id="attr-c", attributes={"customer": None})
    assert [r.id for r in client.list_runs()] == ["attr-b", "attr-a"]


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_the_listing_filters_as_durable_ls(client: Client) -> None:
    """list_runs filters by workflow, status, queue, id part and time, newest first."""
    before = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)
    client.dispatch("client.greet", "a", id="list-a", queue="one")
    client.dispatch("other.flow", 1, id="list-b")
    assert [r.id for r in client.list_runs()] == ["list-b", "list-a"]
    assert [r.id for r in client.list_runs(workflow="other.flow")] == ["list-b"]
    assert [r.id for r in client.list_runs(queue="one", status=["queued"])] == ["list-a"]
    assert [r.id for r in client.list_runs(search="-a", since=before)] == ["list-a"]
    assert client.list_runs(status=[RunStatus.COMPLETED]) == []
    [first] = client.list_runs(limit=1)
    assert [r.id for r in client.list_runs(limit=1, after=first)] == ["list-a"]
    with pytest.raises(ValueError, match="Unknown status"):
        client.list_runs(status=["done"])
    with pytest.raises(ValueError, match="limit"):
        client.list_runs(limit=0)
    with pytest.raises(RunNotFound):
        client.get("no-such-run")


def test_a_client_leaves_the_default_engine_alone(tmp_path: Path) -> None:
    """Client(url) opens its own engine: the process's default is neither made nor
    replaced."""
    previous = defaults.swap(None)
    try:
        with Client(f"sqlite:///{tmp_path / 'c.db'}") as client:
            client.dispatch("client.greet", "a")
            assert defaults._default is None
    finally:
        defaults.swap(previous)


def test_a_memory_client_refuses_a_connection() -> None:
    """connection= with a client on the memory backend: a ConfigurationError."""
    with Client("memory://") as client:
        with pytest.raises(ConfigurationError, match="memory"):
            client.dispatch("client.greet", "a", connection=object(), id=f"m-{uuid.uuid4()}")
        assert client.list_runs() == []
