"""Text durable cannot store is refused where it is given, on every backend alike.

A NUL character or a lone surrogate in an event name, a send's key, a sender, a run id
or a queue name is refused with `InvalidValue` (a ValueError) that names the parameter
and what is wrong with it, before anything is written: PostgreSQL cannot hold a NUL in
text and UTF-8 cannot hold a lone surrogate, so such a value would otherwise work on one
backend and fail on another. What the database refuses anyway (a driver data error) is
`InvalidValue` too, never `StorageError`, which means an outage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import durable
from durable import send, task, wait, workflow
from durable.backends import Backend
from durable.core.records import NewRun, RunQuery
from durable.core.text import check_text
from durable.errors import InvalidValue, StorageError
from durable.ops import BadRequest, Operations
from tests.conftest import BACKENDS

NUL = "order-1\x00x"
SURROGATE = "order-1\udc80"


@task
def echo(value: str) -> str:
    return value


@workflow
def greet(name: str) -> str:
    return f"hello {name}"


@workflow
def waits_for(name: str) -> Any:
    return wait(name, timeout=60)


@workflow
def sends(run_id: str, name: str) -> None:
    send(run_id, name, 1)


@workflow
def catches(name: str) -> str:
    try:
        wait(name, timeout=60)
    except ValueError as error:
        return echo(f"caught: {error}")
    return "no error"


def refused(call: Callable[[], Any], *words: str) -> InvalidValue:
    with pytest.raises(InvalidValue) as caught:
        call()
    assert isinstance(caught.value, ValueError)
    for word in words:
        assert word in str(caught.value), str(caught.value)
    return caught.value


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_check_text_names_the_parameter_and_the_problem(bad: str) -> None:
    problem = "NUL" if "\x00" in bad else "surrogate"
    error = refused(lambda: check_text(bad, "an event name"), "event name", problem, repr(bad))
    assert str(error).endswith(".")
    assert check_text("fine ✓ \n\t", "an event name") == "fine ✓ \n\t"
    refused(lambda: check_text(5, "a run id"), "run id", "string", "int")  # type: ignore[arg-type]


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_dispatch_and_execute_refuse_bad_ids_and_queues(
    url: str, engine: durable.Engine, bad: str
) -> None:
    refused(lambda: durable.dispatch(greet, "x", id=bad), "run id", repr(bad))
    refused(lambda: durable.dispatch(greet, "x", queue=bad), "queue name", repr(bad))
    refused(lambda: durable.execute(greet, "x", id=bad), "run id")
    assert engine.backend.count_runs(RunQuery()) == 0, "nothing was written"


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_send_refuses_bad_event_names_keys_and_run_ids(
    url: str, engine: durable.Engine, bad: str
) -> None:
    handle = durable.dispatch(waits_for, "go", id="waiting", queue="nobody")
    refused(lambda: send(handle, bad, 1), "event name", repr(bad))
    refused(lambda: send(handle, "go", 1, key=bad), "key", repr(bad))
    refused(lambda: send(bad, "go", 1), "run id", repr(bad))
    assert engine.backend.events("waiting") == [], "nothing was sent"


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
def test_wait_and_send_in_a_workflow_raise_into_it(
    url: str, engine: durable.Engine, bad: str
) -> None:
    """In a workflow the refusal is raised by the call: uncaught, the run fails with it
    (once); caught, the workflow goes on."""
    refused(lambda: durable.execute(waits_for, bad, id="waits"), "event name", repr(bad))
    durable.dispatch(waits_for, "go", id="target", queue="nobody")
    refused(lambda: durable.execute(sends, "target", bad, id="sends"), "event name")
    for run_id in ("waits", "sends"):
        run = engine.backend.get_run(run_id)
        assert run is not None and run.status is durable.RunStatus.FAILED
    answer = durable.execute(catches, bad, id="catches")
    assert answer.startswith("caught: ") and "event name" in answer


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_operations_answer_bad_request(url: str, engine: durable.Engine) -> None:
    """The CLI's and the API's operations refuse the same text as a bad request."""
    ops = Operations(engine)
    durable.dispatch(waits_for, "go", id="waiting", queue="nobody")
    for bad in (NUL, SURROGATE):
        with pytest.raises(BadRequest, match="event name"):
            ops.send("waiting", bad)
        with pytest.raises(BadRequest, match="sender"):
            ops.send("waiting", "go", sender=bad)
        with pytest.raises(BadRequest, match="key"):
            ops.send("waiting", "go", key=bad)
        with pytest.raises(BadRequest, match="run id"):
            ops.start(greet.name, ["x"], id=bad)
        with pytest.raises(BadRequest, match="queue name"):
            ops.start(greet.name, ["x"], queue=bad)
    assert engine.backend.events("waiting") == []


def test_registered_names_and_worker_queues_are_checked() -> None:
    """A name or queue a worker's claims would carry: refused at once, where it is
    written, rather than failing every claim the worker makes."""
    refused(lambda: task(name=NUL)(lambda: None), "task name", repr(NUL))
    refused(lambda: workflow(name=SURROGATE)(lambda: None), "workflow name")
    with durable.Engine("memory://") as engine:
        refused(lambda: durable.Worker(engine, queues=["default", NUL]), "queue name")


SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def new_run(run_id: str, **fields: Any) -> NewRun:
    options: dict[str, Any] = {"workflow": "w", "input": b"jnull", "call_hash": "h"}
    return NewRun(id=run_id, owner=None, lease=5.0, **{**options, **fields})


@pytest.mark.parametrize("make_backend", SQL_BACKENDS, indirect=True)
def test_the_database_refusing_a_value_is_invalid_value_not_an_outage(
    make_backend: Callable[[], Backend],
) -> None:
    """Values that reach the database past every check (the backend called directly):
    a number out of range, a lone surrogate, and on PostgreSQL a NUL. Each raises
    InvalidValue naming what was refused, not StorageError; the backend keeps working."""
    backend = make_backend()
    backend.create_run(new_run("r"))
    postgres = backend.dialect_name == "postgresql"  # type: ignore[attr-defined]
    too_big = 2**40 if postgres else 2**70  # past int4 / past SQLite's 64-bit integers
    error = refused(lambda: backend.create_run(new_run("big", priority=too_big)), "refused")
    assert not isinstance(error, StorageError)
    refused(lambda: backend.send_event("r", SURROGATE, b"jnull"), "surrogate")
    if postgres:
        refused(lambda: backend.send_event("r", NUL, b"jnull"), "NUL")
    assert backend.get_run("big") is None
    assert backend.send_event("r", "fine", b"jnull").name == "fine"


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_the_api_answers_400_naming_the_parameter(url: str, engine: durable.Engine) -> None:
    """Over HTTP the same text is a 400 naming the parameter, never a 500, nor a 503 "the
    database is not available" (what PostgreSQL's refusal used to become)."""
    from durable.web import make_app
    from tests.web.client import Client

    durable.dispatch(waits_for, "go", id="waiting", queue="nobody")
    web = make_app(engine, token="refused-text-token-0123456789")
    try:
        client = Client(web, token="refused-text-token-0123456789")
        for bad in (NUL, SURROGATE):
            replies = {
                "'name'": client.post("/api/v1/runs/waiting/events", {"name": bad}),
                "'sender'": client.post(
                    "/api/v1/runs/waiting/events", {"name": "go", "sender": bad}
                ),
                "'id'": client.post(
                    "/api/v1/runs", {"workflow": greet.name, "args": ["x"], "id": bad}
                ),
            }
            if bad == NUL:  # a lone surrogate cannot travel in a UTF-8 URL
                replies["run id "] = client.request("GET", f"/api/v1/runs/{bad}")
            for parameter, reply in replies.items():
                assert reply.status == 400, (parameter, reply.status, reply.body)
                assert parameter.strip() in reply.json()["detail"], reply.json()
    finally:
        web.close()
    assert engine.backend.events("waiting") == []


@pytest.mark.parametrize("url", SQL_BACKENDS, indirect=True)
def test_the_cli_exits_2_naming_the_parameter(
    url: str, engine: durable.Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """`durable show/send` given such text: exit 2 (bad input), `durable: <message>`."""
    from tests.integration.cli_world import Cli

    durable.dispatch(waits_for, "go", id="waiting", queue="nobody")
    cli = Cli(capsys, url)
    for args, parameter in (
        (["show", NUL], "run id"),
        (["send", "waiting", NUL], "event name"),
        (["send", "waiting", "go", "--key", SURROGATE], "key"),
    ):
        done = cli(*args)
        assert done.code == 2, (args, done)
        assert done.err.startswith("durable: ") and parameter in done.err, done.err
