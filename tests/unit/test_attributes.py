"""Run attributes on the memory backend: given at dispatch, set by the workflow
(recorded once, replay-safe), carried through continue-as-new and to children, and the
bad input refused with nothing written."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable import RunStatus, StepKind, StepStatus
from durable.core.records import RunQuery
from durable.errors import ConfigurationError, DurableError
from durable.ops import BadRequest, Operations
from durable.testing import DurableEnv

#: what `changing` sets: a test changes it between executions of one run.
STAGE = {"value": "asked"}


@durable.task
def step(i: int) -> int:
    return i


@durable.task
def tagging_task() -> None:
    durable.set_attributes(x=1)


@durable.workflow
def tagged(n: int) -> int:
    step(1)
    durable.set_attributes(stage="asked", n=n)
    durable.wait("go")
    durable.set_attributes({"stage": "done", "order-id": 17})
    return step(2)


@durable.workflow
def changing() -> str:
    durable.set_attributes(stage=STAGE["value"])
    durable.wait("go")
    return "ok"


@durable.workflow
def too_many(count: int) -> str:
    durable.set_attributes({f"a{i}": i for i in range(count)})
    try:
        durable.set_attributes({f"b{i}": i for i in range(count)})
    except ValueError as error:
        return f"refused: {error}"
    return "set"


@durable.workflow
def chained(i: int) -> int:
    if i == 0:
        durable.set_attributes(stage="first")
        durable.continue_as_new(1)
    return step(i)


@durable.workflow
def parent() -> str:
    handle = durable.dispatch(step, 3, attributes={"role": "child"})
    return handle.id


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as environment:
        yield environment


def _listed(engine: durable.Engine, **attributes: Any) -> list[str]:
    page = Operations(engine).list_runs(attributes=attributes)
    return sorted(item["id"] for item in page["items"])


def test_dispatch_stores_typed_attributes_and_listings_filter_by_them(env: DurableEnv) -> None:
    """dispatch(attributes=) stores each value with its type; ops listings filter on the
    canonical text (n=5 finds 5 and 5.0), several filters ANDed, each item showing its
    attributes."""
    durable.dispatch(step, 1, id="a", attributes={"customer": "c-42", "n": 5, "vip": True})
    durable.dispatch(step, 2, id="b", attributes={"customer": "c-42", "n": 5.0, "vip": False})
    durable.dispatch(step, 3, id="c")
    assert durable.get("a").attributes() == {"customer": "c-42", "n": 5, "vip": True}
    assert type(durable.get("b").attributes()["n"]) is float
    assert durable.get("c").attributes() == {}
    assert _listed(env.engine, customer="c-42") == ["a", "b"]
    assert _listed(env.engine, n="5") == ["a", "b"]
    assert _listed(env.engine, n=5, vip=True) == ["a"]
    assert _listed(env.engine, customer="c-42", vip="false") == ["b"]
    ops = Operations(env.engine)
    assert ops.count_runs(attributes={"customer": "c-42"}) == 2
    items = {item["id"]: item for item in ops.list_runs()["items"]}
    assert items["a"]["attributes"] == {"customer": "c-42", "n": 5, "vip": True}
    assert items["c"]["attributes"] == {}
    assert ops.get_run("b")["attributes"] == {"customer": "c-42", "n": 5.0, "vip": False}


@pytest.mark.parametrize(
    ("attributes", "error", "match"),
    [
        ({"tags": ["a"]}, TypeError, r"Attribute 'tags' must be a str, int, float or bool"),
        ({"when": None}, TypeError, r"not NoneType"),
        ({"raw": b"x"}, TypeError, r"not bytes"),
        ({"n": float("nan")}, ValueError, r"finite"),
        ({"": "x"}, ValueError, r"1 to 64 characters"),
        ({"a=b": "x"}, ValueError, r"without '='"),
        ({7: "x"}, TypeError, r"key must be a string"),
        ({"note": "x" * 300}, ValueError, r"at most 256"),
        ({f"k{i}": i for i in range(33)}, ValueError, r"at most 32"),
        (["customer", "c-42"], TypeError, r"mapping"),
        ({"nul": "a\x00b"}, ValueError, r"NUL"),
    ],
)
def test_bad_attributes_are_refused_and_nothing_is_written(
    env: DurableEnv, attributes: Any, error: type[Exception], match: str
) -> None:
    """A value that is not a str, number or bool, a bad key, too many attributes: a
    clear error at dispatch, and no run."""
    with pytest.raises(error, match=match):
        durable.dispatch(step, 1, id="bad", attributes=attributes)
    assert env.engine.backend.count_runs(RunQuery()) == 0


def test_the_limit_is_configurable() -> None:
    """Engine(max_attributes=) raises or lowers the limit; a nonsense one is refused."""
    with DurableEnv() as env:
        env.engine.max_attributes = 2
        with pytest.raises(ValueError, match="at most 2"):
            durable.dispatch(step, 1, attributes={"a": 1, "b": 2, "c": 3})
    with pytest.raises(ConfigurationError, match="max_attributes"):
        durable.Engine("memory://", max_attributes=0)


def test_set_attributes_is_recorded_once_and_not_written_again_on_replay(
    env: DurableEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """set_attributes takes a position (an ATTRIBUTES step) and writes there; the replay
    after the wait finds the step and writes nothing; later keys update, others stay."""
    writes: list[Any] = []
    record = env.engine.backend.record_attributes

    def counted(step: Any, epoch: int, attributes: Any) -> Any:
        writes.append(dict(attributes))
        return record(step, epoch, attributes)

    monkeypatch.setattr(env.engine.backend, "record_attributes", counted)
    handle = durable.dispatch(tagged, 5, id="t")
    env.run_until_idle()
    assert handle.attributes() == {"n": 5, "stage": "asked"}
    durable.send("t", "go")
    assert handle.result() == 2
    assert writes == [{"stage": "asked", "n": 5}, {"stage": "done", "order-id": 17}]
    assert handle.attributes() == {"n": 5, "order-id": 17, "stage": "done"}
    kinds = [(s.kind, s.status) for s in env.engine.backend.load_history("t")]
    assert kinds.count((StepKind.ATTRIBUTES, StepStatus.COMPLETED)) == 2
    assert _listed(env.engine, stage="done") == ["t"]


def test_changed_attributes_at_a_recorded_position_diverge(env: DurableEnv) -> None:
    """Code that now sets other values where the run recorded set_attributes is a
    divergence: the run is blocked, its stored attributes unchanged."""
    STAGE["value"] = "asked"
    handle = durable.dispatch(changing, id="c")
    env.run_until_idle()
    STAGE["value"] = "other"
    try:
        durable.send("c", "go")
        env.run_until_idle()
    finally:
        STAGE["value"] = "asked"
    assert durable.get("c").status() is RunStatus.BLOCKED
    assert handle.attributes() == {"stage": "asked"}


def test_going_over_the_limit_in_a_workflow_fails_that_call_and_is_recorded(
    env: DurableEnv,
) -> None:
    """set_attributes that would take the run past max_attributes raises ValueError in
    the workflow (which may catch it); the refusal is recorded and nothing is set. More
    than the limit in one call is refused before taking a position."""
    assert durable.execute(too_many, 20, id="many") == (
        "refused: Run 'many' would hold 40 attributes after set_attributes() at position 1; "
        "a run may hold at most 32 (Engine(max_attributes=...) / configure(max_attributes=...))."
    )
    assert len(durable.get("many").attributes()) == 20
    first, failed = env.engine.backend.load_history("many")
    assert first.kind is StepKind.ATTRIBUTES
    assert (failed.kind, failed.status) == (StepKind.ATTRIBUTES, StepStatus.FAILED)
    assert durable.execute(too_many, 3, id="few") == "set"
    with pytest.raises(ValueError, match="at most 32"):
        durable.execute(too_many, 33, id="at-once")
    assert env.engine.backend.load_history("at-once") == []


def test_set_attributes_outside_a_workflow_is_an_error(env: DurableEnv) -> None:
    """In application code or a task body set_attributes says where to give them."""
    with pytest.raises(DurableError, match=r"attributes= to durable\.dispatch"):
        durable.set_attributes(a=1)
    with pytest.raises(DurableError, match="no workflow is running"):
        durable.execute(tagging_task)


def test_continue_as_new_carries_attributes_and_children_take_their_own(
    env: DurableEnv,
) -> None:
    """The successor holds its predecessor's attributes; a child dispatched with
    attributes= holds them, and does not inherit its parent's."""
    durable.execute(chained, 0, id="ch")
    assert durable.get("ch~1").attributes() == {"stage": "first"}
    assert _listed(env.engine, stage="first") == ["ch", "ch~1"]
    child = durable.execute(parent, id="p")
    assert durable.get(child).attributes() == {"role": "child"}
    assert durable.get("p").attributes() == {}


def test_debounce_with_attributes_is_refused(env: DurableEnv) -> None:
    """A debounced dispatch merges runs, so it takes no attributes=."""
    with pytest.raises(TypeError, match="debounce"):
        durable.dispatch(step, 1, key="k", debounce=5, attributes={"a": 1})
    assert env.engine.backend.count_runs(RunQuery()) == 0


def test_a_bad_filter_key_is_a_bad_request(env: DurableEnv) -> None:
    """An attribute filter whose key cannot be one is refused, naming it."""
    with pytest.raises(BadRequest, match="without '='"):
        Operations(env.engine).list_runs(attributes={"": "x"})
