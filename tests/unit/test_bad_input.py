"""Bad input gets a clear error and loses nothing."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

import durable
from durable import RunStatus, StepStatus, execute, task, workflow
from durable.core.records import NewRun
from durable.errors import DuplicateNameError, SerializationError, StorageError
from tests.unit.helpers import history, run


def runs_stored(engine: durable.Engine) -> int:
    """How many runs the engine's memory backend holds."""
    return len(engine.backend._runs)  # type: ignore[attr-defined]


@workflow
def takes_anything(value: object) -> str:
    return type(value).__name__


def test_unserializable_argument_writes_nothing(memory_engine: durable.Engine) -> None:
    """An argument that cannot be stored raises SerializationError naming it; no run exists."""
    with pytest.raises(SerializationError) as caught:
        execute(takes_anything, threading.Lock(), id="locked")
    message = str(caught.value)
    assert "argument 'value'" in message and "lock" in message.lower()
    assert runs_stored(memory_engine) == 0


def test_pickle_free_engine_refuses_arbitrary_objects() -> None:
    """With allow_pickle=False, an object JSON cannot express is refused before any write."""

    class Opaque:
        pass

    engine = durable.configure("memory://", allow_pickle=False)
    try:
        with pytest.raises(SerializationError, match="pickling is disabled"):
            execute(takes_anything, Opaque())
        assert runs_stored(engine) == 0
        assert execute(takes_anything, {"plain": [1, 2.5, None]}) == "dict"
    finally:
        engine.close()


def test_wrong_arguments_raise_type_error_before_writing(memory_engine: durable.Engine) -> None:
    """Arguments that do not fit the signature raise TypeError naming the workflow."""

    @workflow
    def needs_two(a: int, b: int) -> int:
        return a + b

    with pytest.raises(TypeError, match=r"needs_two\(\): missing a required argument: 'b'"):
        execute(needs_two, 1)
    with pytest.raises(TypeError, match="unexpected keyword"):
        execute(needs_two, 1, 2, c=3)
    with pytest.raises(TypeError):
        needs_two.bind(1, 2, 3)  # type: ignore[call-arg]
    assert runs_stored(memory_engine) == 0


def test_duplicate_names_are_refused_at_decoration() -> None:
    """Two different functions under one name fail when the second is decorated."""

    @task(name="tests.duplicate")
    def first() -> None: ...

    with pytest.raises(DuplicateNameError, match=r"already taken .*name=") as caught:

        @task(name="tests.duplicate")
        def second() -> None: ...

    assert isinstance(caught.value, ValueError)


def test_methods_are_refused_at_decoration_with_what_to_do() -> None:
    """@task / @workflow on a method would drop self: refused in the class body itself.
    Functions nested in functions (not in a class) stay allowed."""
    with pytest.raises(TypeError, match=r"not methods: .*Shop\.charge is defined in a class"):

        class Shop:
            @durable.task
            def charge(self, amount: int) -> int:
                return amount

    with pytest.raises(TypeError, match="module-level @workflow function"):

        class Flows:
            @durable.workflow(name="flows.run")
            def run(self) -> None: ...

    with pytest.raises(TypeError, match="not methods"):

        class Tools:
            @durable.task
            @staticmethod
            def helper() -> None: ...

    def outer() -> durable.Task[[], int]:
        @durable.task(name="nested.inner.allowed")
        def inner() -> int:
            return 1

        return inner

    assert outer()() == 1


def test_redecorating_the_same_definition_is_allowed() -> None:
    """The same definition seen twice (a factory called again, a reload) is not a duplicate."""

    def factory() -> durable.Workflow[[], None]:
        @workflow(name="tests.factory-made")
        def made() -> None: ...

        return made

    assert factory().name == factory().name == "tests.factory-made"


def test_unstorable_task_result_fails_that_call_deterministically(
    memory_engine: durable.Engine,
) -> None:
    """A task result that cannot be stored is recorded as a SerializationError and replays so."""
    bodies: list[int] = []

    @task
    def make_lock() -> threading.Lock:
        bodies.append(1)
        return threading.Lock()

    @workflow
    def flow() -> str:
        try:
            make_lock()
        except SerializationError as error:
            return f"caught {error.type_name}"
        return "stored?"

    assert execute(flow, id="unstorable") == "caught _thread.lock"
    (step,) = history("unstorable")
    assert step.status is StepStatus.FAILED and "position 0" in str(step.error)
    assert execute(flow, id="unstorable") == "caught _thread.lock"
    assert bodies == [1]


def test_unstorable_workflow_result_fails_the_run(memory_engine: durable.Engine) -> None:
    """A workflow result that cannot be stored fails the run with SerializationError."""

    @workflow
    def returns_lock() -> threading.Lock:
        return threading.Lock()

    with pytest.raises(SerializationError, match="result of run 'lock-run'"):
        execute(returns_lock, id="lock-run")
    assert run("lock-run").status is RunStatus.FAILED


def test_unknown_workflow_is_left_alone_by_recover(
    memory_engine: durable.Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """recover() skips a run whose workflow is not registered, logs why, and claims nothing."""
    backend = memory_engine.backend
    backend.create_run(
        NewRun(
            id="from-newer-code",
            workflow="app.added_in_next_release",
            input=b'j{"args":[],"kwargs":{}}',
            call_hash="v1:00",
            owner="elsewhere:1:1:x",
            lease=0.01,
        )
    )
    time.sleep(0.05)
    with caplog.at_level(logging.ERROR, logger="durable"):
        assert durable.recover() == []
        assert durable.recover() == []
    stored = run("from-newer-code")
    assert stored.status is RunStatus.RUNNING and stored.epoch == 1, "the run must stay untouched"
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1, "logged once, not at every pass"
    assert "app.added_in_next_release" in messages[0] and "import the module" in messages[0]

    @workflow(name="app.added_in_next_release")
    def arrived() -> str:
        return "finished by code that knows it"

    assert durable.recover() == ["from-newer-code"]
    assert run("from-newer-code").status is RunStatus.COMPLETED


def test_unreachable_database_names_the_url_without_password() -> None:
    """A database that cannot be reached raises StorageError with the password masked."""
    with pytest.raises(StorageError) as caught:
        durable.Engine("postgresql://app:hunter2@127.0.0.1:1/nowhere")
    message = str(caught.value)
    assert "hunter2" not in message
    assert "postgresql://app:***@127.0.0.1:1/nowhere" in message
    assert "Cannot connect" in message


def test_sqlite_in_a_missing_directory_is_a_clear_error(tmp_path: object) -> None:
    """A SQLite path whose directory does not exist fails with the path in the message."""
    with pytest.raises(StorageError, match="missing-dir"):
        durable.Engine(f"sqlite:///{tmp_path}/missing-dir/durable.db")


def test_unsupported_url_is_a_configuration_error() -> None:
    """A URL of an unsupported database says which ones are supported."""
    with pytest.raises(durable.errors.ConfigurationError, match="sqlite:/// and postgresql://"):
        durable.Engine("mysql://root@localhost/db")


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections and never says a word (a hung server)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in [*held, listener]:
            conn.close()


@pytest.mark.parametrize("where", ["default", "url"])
def test_a_silent_database_server_fails_the_connect_in_time(
    silent_server: int, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that takes the connection but never answers fails it after the connect
    timeout (ours by default, or the URL's ``connect_timeout``), not the OS's minutes,
    with the password masked."""
    from durable.backends import _connections

    url = f"postgresql://app:hunter2@127.0.0.1:{silent_server}/nowhere"
    if where == "default":
        monkeypatch.setattr(_connections, "CONNECT_TIMEOUT", 2)
    else:
        monkeypatch.setattr(_connections, "CONNECT_TIMEOUT", 600)
        url += "?connect_timeout=2"
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        durable.Engine(url)
    assert 1.5 < time.monotonic() - started < 10
    message = str(caught.value)
    assert "hunter2" not in message and "Cannot connect" in message
    assert f"postgresql://app:***@127.0.0.1:{silent_server}/nowhere" in message
