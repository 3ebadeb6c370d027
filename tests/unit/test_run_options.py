"""Run options checked at the call (`durable.core.run_options`): ids users choose,
queues, priorities; and the claim order, which no stored row can break."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import durable
from durable import RunStatus, dispatch, execute, task, workflow
from durable.core.records import Run
from durable.core.run_options import (
    MAX_NAME_BYTES,
    PRIORITY_MAX,
    PRIORITY_MIN,
    check_priority,
    check_queue,
    check_run_id,
    claim_order,
    is_child_form,
)
from tests.unit.helpers import history


@pytest.fixture
def engine(memory_engine: durable.Engine) -> durable.Engine:
    """The default engine on a fresh memory backend (the shared fixture)."""
    return memory_engine


@task
def double(n: int) -> int:
    return n * 2


@workflow
def twice(n: int) -> int:
    return double(n)


# -- the checks themselves ------------------------------------------------------------


@pytest.mark.parametrize("run_id", ["p/0", "p/12", "a/b/3", "/0", "nightly/2026/11/21"])
def test_child_form_is_reserved(run_id: str) -> None:
    """``<anything>/<digits>`` is the form of children's ids: users cannot choose it,
    and the error says why and what to use instead."""
    assert is_child_form(run_id)
    with pytest.raises(ValueError, match="child") as raised:
        check_run_id(run_id)
    assert "separator" in str(raised.value)


@pytest.mark.parametrize(
    "run_id", ["order-1", "a/b", "a/1b", "2026/11/x", "p/", "p/\u0661", "x" * MAX_NAME_BYTES]
)
def test_other_ids_are_accepted(run_id: str) -> None:
    """A slash is fine, as long as the id does not end in ``/<ASCII digits>``."""
    assert not is_child_form(run_id)
    assert check_run_id(run_id) == run_id


@pytest.mark.parametrize(
    ("run_id", "error", "words"),
    [
        ("", ValueError, "empty"),
        ("x" * (MAX_NAME_BYTES + 1), ValueError, "512"),
        ("é" * 257, ValueError, "512"),  # 514 bytes in UTF-8
        (7, TypeError, "string"),
        (b"id", TypeError, "string"),
    ],
)
def test_bad_ids_are_refused(run_id: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=words):
        check_run_id(run_id)


@pytest.mark.parametrize(
    ("queue", "error"),
    [("", ValueError), ("q" * (MAX_NAME_BYTES + 1), ValueError), (None, TypeError), (3, TypeError)],
)
def test_bad_queues_are_refused(queue: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="queue"):
        check_queue(queue)
    assert check_queue("mail") == "mail"


def test_priority_is_an_int4() -> None:
    """The whole int4 range is accepted; anything else is refused, naming the range."""
    assert (PRIORITY_MIN, PRIORITY_MAX) == (-(2**31), 2**31 - 1)
    for good in (PRIORITY_MIN, -1, 0, 5, PRIORITY_MAX):
        assert check_priority(good) == good
    for bad in (PRIORITY_MAX + 1, PRIORITY_MIN - 1, 10**22):
        with pytest.raises(ValueError, match="2147483647"):
            check_priority(bad)
    for wrong in ("high", 1.0, True, None, [1]):
        with pytest.raises(TypeError, match="priority"):
            check_priority(wrong)


def _run(run_id: str, priority: Any, created_at: Any) -> Run:
    return Run(
        id=run_id,
        workflow="w",
        status=RunStatus.RUNNING,
        input=b"j[]",
        call_hash="v1:x",
        output=None,
        error=None,
        epoch=1,
        lease_owner=None,
        lease_until=None,
        recoveries=0,
        parent_id=None,
        priority=priority,
        created_at=created_at,
        updated_at=0.0,
        finished_at=None,
    )


def test_claim_order_survives_any_stored_row() -> None:
    """Highest priority first, then oldest; a row whose priority or creation time is
    not a number (SQLite stores any type) sorts last instead of breaking the sort."""
    batch = [
        _run("text", "high", 1.0),
        _run("old", 0, 1.0),
        _run("new", 0, 2.0),
        _run("urgent", 9, 3.0),
        _run("none", None, 0.5),
        _run("no-time", 9, "yesterday"),
        _run("nan-time", 0, float("nan")),
    ]
    ordered = [run.id for run in sorted(batch, key=claim_order)]
    assert ordered[:4] == ["urgent", "no-time", "old", "new"]
    assert ordered[4] == "nan-time"
    assert set(ordered[5:]) == {"text", "none"}


# -- at the call ------------------------------------------------------------------------


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"priority": "high"}, TypeError),
        ({"priority": True}, TypeError),
        ({"priority": 2**31}, ValueError),
        ({"id": "p/0"}, ValueError),
        ({"id": ""}, ValueError),
        ({"queue": ""}, ValueError),
    ],
)
def test_dispatch_refuses_bad_options_before_storing(
    options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        dispatch(twice, 1, **options)
    assert durable.get_engine().backend._runs == {}  # type: ignore[attr-defined]


@pytest.mark.usefixtures("engine")
def test_execute_refuses_a_child_id() -> None:
    with pytest.raises(ValueError, match="child"):
        execute(twice, 1, id="p/0")
    assert durable.get_engine().backend._runs == {}  # type: ignore[attr-defined]


@workflow
def dispatches_badly(priority: Any) -> str:
    try:
        dispatch(twice, 1, priority=priority)
    except (TypeError, ValueError) as error:
        return type(error).__name__
    return "dispatched"


@pytest.mark.usefixtures("engine")
def test_a_workflow_dispatch_with_a_bad_priority_raises_there_and_records_nothing() -> None:
    assert execute(dispatches_badly, "high", id="w1") == "TypeError"
    assert execute(dispatches_badly, -(2**40), id="w2") == "ValueError"
    assert history("w1") == [] and history("w2") == []
    assert execute(dispatches_badly, PRIORITY_MAX, id="w3") == "dispatched"


def test_claim_next_on_memory_survives_a_text_priority(engine: durable.Engine) -> None:
    """A row with a text priority (put there by hand) neither stops the claim nor
    strands the runs claimed with it: every run completes."""
    for n in range(3):
        dispatch(twice, n, id=f"job-{n}")
    backend: Any = engine.backend
    with backend._lock:
        backend._runs["job-1"] = dataclasses.replace(backend._runs["job-1"], priority="high")
    with durable.Worker(engine, concurrency=4, poll=0.02):
        assert [durable.get(f"job-{n}").result(timeout=10) for n in range(3)] == [0, 2, 4]
