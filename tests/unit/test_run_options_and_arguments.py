"""Run options and the workflow's own keyword arguments share one keyword space.

The rule (docs/reference/api.md, "Run options and your function's arguments"): in the
flat form ``dispatch(fn, *args, **kwargs)`` a keyword that names a run option of the
verb goes to the run, unless *fn* has a parameter of that name: then the call is a
``TypeError`` that says how to write either meaning with ``fn.bind(...)``, and nothing
is written. The bound form ``dispatch(fn.bind(...), id=...)`` is never ambiguous.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import durable
from durable import Worker, dispatch, execute, execute_async, task, workflow
from durable.core.records import RunQuery
from durable.core.run_options import VERB_OPTIONS
from durable.testing import DurableEnv
from tests.unit.helpers import history

BACKENDS = ["memory", "sqlite"]


@pytest.fixture
def engine(url: str) -> Iterator[durable.Engine]:
    engine = durable.configure(url, lease=2.0)
    try:
        yield engine
    finally:
        engine.close()


def _runs(engine: durable.Engine) -> int:
    return engine.backend.count_runs(RunQuery())


@workflow
def process(n: int, id: str = "none") -> str:
    return f"{n}:{id}"


@task
def route(queue: str, *, priority: int = 0) -> str:
    return f"{queue}:{priority}"


@workflow
def loose(**kwargs: Any) -> dict[str, Any]:
    return kwargs


@workflow
def positional(id: int, /, **kwargs: Any) -> list[Any]:
    return [id, kwargs]


@task
async def aprocess(n: int, id: str = "none") -> str:
    await asyncio.sleep(0)
    return f"{n}:{id}"


# -- a clash is refused, says both meanings, and writes nothing -----------------------


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_flat_id_that_is_also_a_parameter_is_refused(engine: durable.Engine) -> None:
    """``process`` has a parameter ``id``: ``dispatch(process, 1, id=...)`` could mean
    either, so it is a TypeError naming the parameter, the option and both bound forms."""
    with pytest.raises(TypeError) as raised:
        dispatch(process, 1, id="run-1")
    message = str(raised.value)
    assert "process() has a parameter named 'id'" in message
    assert "dispatch()'s run option" in message
    assert "dispatch(process.bind(..., id='run-1'))" in message
    assert "dispatch(process.bind(...), id='run-1')" in message
    assert _runs(engine) == 0

    with pytest.raises(TypeError, match=r"execute\(process\.bind\(\.\.\.\), id='run-1'\)"):
        execute(process, 1, id="run-1")
    assert _runs(engine) == 0


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_flat_queue_and_priority_that_are_parameters_are_refused(engine: durable.Engine) -> None:
    """Every option of the verb follows the rule, keyword-only parameters included, and
    a positional argument does not make the keyword any less ambiguous."""
    for call in (
        lambda: dispatch(route, queue="fast"),
        lambda: dispatch(route, "mine", queue="fast"),
        lambda: dispatch(route, "mine", priority=3),
    ):
        with pytest.raises(TypeError, match=r"route\(\) has a parameter named '(queue|priority)'"):
            call()
    assert _runs(engine) == 0


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_execute_async_refuses_a_clash_too(engine: durable.Engine) -> None:
    with pytest.raises(TypeError, match=r"execute_async\(aprocess\.bind\(\.\.\.\), id='r'\)"):
        asyncio.run(execute_async(aprocess, 1, id="r"))
    assert _runs(engine) == 0


def test_the_testing_kit_follows_the_rule() -> None:
    with DurableEnv() as env:
        with pytest.raises(TypeError, match="process\\(\\) has a parameter named 'id'"):
            env.dispatch(process, 1, id="run-1")
        assert env.dispatch(process.bind(1, id="mine"), id="run-1").result() == "1:mine"
        assert env.execute(process.bind(2, id="x"), id="run-2") == "2:x"


def test_a_clash_inside_a_workflow_is_refused_there(memory_engine: durable.Engine) -> None:
    """Inside a workflow the same call is the same mistake (and records nothing)."""

    @workflow(name="tests.options.parent")
    def parent() -> str:
        dispatch(route, "mine", queue="fast")
        return "unreachable"

    with pytest.raises(TypeError, match="route\\(\\) has a parameter named 'queue'"):
        execute(parent, id="parent-1")
    assert history("parent-1") == []
    assert memory_engine.backend.count_runs(RunQuery()) == 1  # the parent, no child


# -- the bound form says either meaning, or both --------------------------------------


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_bound_form_gives_the_workflow_its_id_and_the_run_its_id(engine: durable.Engine) -> None:
    assert execute(process.bind(1, id="mine"), id="run-1") == "1:mine"
    assert engine.reread("run-1").status is durable.RunStatus.COMPLETED
    assert execute(process.bind(2, id="only-mine")) == "2:only-mine"
    assert execute(process.bind(3), id="run-3") == "3:none"

    handle = dispatch(process.bind(4, id="mine"), id="run-4")
    assert handle.id == "run-4"
    with Worker(engine, poll=0.05):
        assert handle.result(timeout=5) == "4:mine"


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_bound_form_gives_queue_and_priority_to_either(engine: durable.Engine) -> None:
    handle = dispatch(route.bind("mine", priority=7), queue="fast", priority=3)
    stored = handle.run()
    assert (stored.queue, stored.priority) == ("fast", 3)
    with Worker(engine, queues=["fast"], poll=0.05):
        assert handle.result(timeout=5) == "mine:7"


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_execute_async_bound_form(engine: durable.Engine) -> None:
    assert asyncio.run(execute_async(aprocess.bind(1, id="mine"), id="run-a")) == "1:mine"
    assert engine.reread("run-a").status is durable.RunStatus.COMPLETED


# -- no parameter of that name: the keyword is the run's option, as before ------------


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_kwargs_only_function_gives_the_option_to_the_run(engine: durable.Engine) -> None:
    """``**kwargs`` is not a parameter named ``id``: the flat keyword is the run's id."""
    assert execute(loose, id="run-k", other=1) == {"other": 1}
    assert engine.reread("run-k").status is durable.RunStatus.COMPLETED
    handle = dispatch(loose, id="run-d", queue="slow", priority=2, colour="red")
    assert (handle.id, handle.run().queue, handle.run().priority) == ("run-d", "slow", 2)
    assert asyncio.run(execute_async(loose, id="run-ka")) == {}
    assert engine.reread("run-ka").status is durable.RunStatus.COMPLETED


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_positional_only_parameter_is_not_a_clash(engine: durable.Engine) -> None:
    """A positional-only ``id`` cannot take a keyword (inspect would bind ``id=`` to
    ``**kwargs``), so the keyword is the run's id."""
    assert execute(positional, 5, id="run-p") == [5, {}]
    assert engine.reread("run-p").status is durable.RunStatus.COMPLETED


# -- the table is the verbs' options, all of them ------------------------------------


def _option_keywords(fn: Callable[..., Any]) -> set[str]:
    """The keyword-only parameters of *fn* and of each of its overloads."""
    names: set[str] = set()
    for each in (fn, *typing.get_overloads(fn)):
        names |= {
            p.name for p in inspect.signature(each).parameters.values() if p.kind is p.KEYWORD_ONLY
        }
    return names


VERBS: list[tuple[str, Callable[..., Any]]] = [
    ("dispatch", durable.dispatch),
    ("execute", durable.execute),
    ("execute_async", durable.execute_async),
    ("dispatch", DurableEnv.dispatch),
    ("dispatch", DurableEnv.execute),  # it takes dispatch's options
]


@pytest.mark.parametrize(("verb", "fn"), VERBS, ids=[f"{f.__qualname__}" for _, f in VERBS])
def test_every_option_keyword_of_a_verb_is_in_the_table(verb: str, fn: Callable[..., Any]) -> None:
    """A verb that gains a keyword (``timeout=``...) without adding it to VERB_OPTIONS
    would take it from the function's arguments without the clash check: this fails."""
    assert _option_keywords(fn) <= set(VERB_OPTIONS[verb]), (
        f"{fn.__qualname__} takes keywords that are not in VERB_OPTIONS[{verb!r}]"
    )


def test_the_typed_overloads_offer_every_option_in_the_table() -> None:
    """The other way round: what the table lists, the typed forms accept."""
    assert _option_keywords(durable.dispatch) == set(VERB_OPTIONS["dispatch"])
    assert _option_keywords(durable.execute) == set(VERB_OPTIONS["execute"])
