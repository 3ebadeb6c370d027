"""User code as a type checker sees it: mypy checks this file (it is never run)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import assert_type

import durable
from durable import Call, execute, task, workflow
from durable.testing import DurableEnv


@task
def fetch(n: int, *, scale: float = 1.0) -> float:
    return n * scale


@task(retry=dict(attempts=3), name="typed.flaky")
def flaky(text: str) -> list[str]:
    return [text]


@task
async def afetch(n: int) -> int:
    await asyncio.sleep(0)
    return n


@workflow
def pipeline(n: int) -> tuple[float, list[str]]:
    a = fetch(n, scale=2.0)
    assert_type(a, float)
    b, c = execute(fetch.bind(n), flaky.bind("x"))
    assert_type(b, float)
    assert_type(c, list[str])
    return a, c


@workflow
async def apipeline(n: int) -> int:
    value = await afetch(n)
    assert_type(value, int)
    return value


@dataclasses.dataclass
class Approval:
    approved: bool


@workflow(events={"approval": Approval})
def approving() -> bool:
    # A typed event's wait returns the schema's instance; an untyped one, Any.
    approval = durable.wait("approval", schema=Approval, timeout=60)
    assert_type(approval, Approval)
    durable.send("other-run", "approval", approval)
    return approval.approved


def application() -> None:
    # Signatures survive decoration: a wrong argument is an error (strict mode also
    # reports an unneeded ignore, so each of these lines fails if it stops being one).
    fetch(1, scale="x")  # type: ignore[arg-type]
    fetch("1")  # type: ignore[arg-type]
    pipeline(3, 4)  # type: ignore[call-arg]
    assert_type(fetch(1), float)
    assert_type(pipeline(3), tuple[float, list[str]])
    assert_type(pipeline.bind(3), Call[tuple[float, list[str]]])
    assert_type(execute(pipeline, 3, id="p-3"), tuple[float, list[str]])
    assert_type(execute(pipeline.bind(3)), tuple[float, list[str]])
    assert_type(execute(apipeline, 1), int)
    assert_type(durable.now().year, int)
    assert_type(durable.recover(), list[str])
    pipeline.bind("three")  # type: ignore[arg-type]
    # Run options with a bound call: the arguments are checked, the options typed.
    assert_type(durable.dispatch(pipeline.bind(3), id="p-3", queue="q", priority=1).id, str)
    durable.dispatch(pipeline.bind(3), priority="high")  # type: ignore[call-overload]
    # A fork keeps the original's result type.
    handle = durable.dispatch(pipeline.bind(3))
    assert_type(handle.fork(1).result(), tuple[float, list[str]])
    assert_type(durable.fork("p-3", from_position=0, id="p-3b").id, str)
    handle.fork("1")  # type: ignore[arg-type]


def outbox_and_client(conn: object) -> None:
    # dispatch in the caller's transaction keeps the handle's result type.
    assert_type(
        durable.dispatch(pipeline.bind(3), connection=conn).result(), tuple[float, list[str]]
    )
    # A client knows no signatures: handles of Any, runs listed as records.
    with durable.Client("sqlite:///app.db") as client:
        handle = client.dispatch("typed.pipeline", 3, id="p-3", queue="q", attributes={"a": "b"})
        assert_type(handle.id, str)
        assert_type(client.get("p-3").status(), durable.RunStatus)
        assert_type(client.list_runs(status=["failed"], limit=10), list[durable.Run])
        client.dispatch(pipeline, 3)  # type: ignore[arg-type]


def testing_kit(env: DurableEnv) -> None:
    assert_type(env.execute(pipeline, 3), tuple[float, list[str]])
    assert_type(env.execute(pipeline.bind(3), id="p-3"), tuple[float, list[str]])


async def async_application() -> None:
    # execute_async is typed as execute is: results, and id= as a str.
    assert_type(await durable.execute_async(apipeline, 1), int)
    assert_type(await durable.execute_async(pipeline, 3, id="p-3"), tuple[float, list[str]])
    assert_type(await durable.execute_async(apipeline.bind(1), id="a-1"), int)
    b, c = await durable.execute_async(fetch.bind(1), flaky.bind("x"))
    assert_type(b, float)
    assert_type(c, list[str])
    await durable.execute_async(pipeline.bind(3), id=3)  # type: ignore[call-overload]


@workflow
def poller(cursor: int) -> int:
    # continue_as_new never returns: code after it is unreachable for the checker.
    if cursor < 10:
        durable.continue_as_new(cursor + 1)
    return cursor
