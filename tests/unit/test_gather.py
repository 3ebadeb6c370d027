"""gather(calls): dynamic fan-out that always returns a list, none and one included."""

from __future__ import annotations

import asyncio

import pytest

from durable import StepKind, execute, gather, gather_async, task, workflow
from tests.unit.helpers import history

pytestmark = pytest.mark.usefixtures("memory_engine")


@task
def word(text: str) -> str:
    return text.upper()


@task
async def aword(text: str) -> str:
    return text.upper()


@workflow
def shout(words: list[str]) -> list[str]:
    return sorted(gather(word.bind(w) for w in words))


@workflow
async def ashout(words: list[str]) -> list[str]:
    return await gather_async([aword.bind(w) for w in words])


@pytest.mark.parametrize(
    ("words", "expected"), [([], []), (["one"], ["ONE"]), (["b", "a", "c"], ["A", "B", "C"])]
)
def test_gather_returns_a_list_whatever_the_count(words: list[str], expected: list[str]) -> None:
    """None, one, several: always a list (one string result is not split by sorted())."""
    run_id = f"shout-{len(words)}"
    assert execute(shout, words, id=run_id) == expected
    assert [s.kind for s in history(run_id)] == [StepKind.TASK] * len(words)
    assert execute(shout, words, id=run_id) == expected  # replayed from the history


@pytest.mark.parametrize("words", [[], ["one"], ["x", "y"]])
def test_gather_async_returns_a_list_whatever_the_count(words: list[str]) -> None:
    assert execute(ashout, words) == [w.upper() for w in words]


def test_gather_takes_the_positions_execute_takes() -> None:
    """A group of calls takes consecutive positions, as execute(*calls) does."""

    @workflow
    def both() -> tuple[list[str], tuple[str, ...]]:
        return gather([word.bind("a"), word.bind("b")]), execute(word.bind("c"), word.bind("d"))

    assert execute(both, id="both") == (["A", "B"], ("C", "D"))
    assert [(s.position, s.output) for s in history("both")] == [
        (0, b'j"A"'),
        (1, b'j"B"'),
        (2, b'j"C"'),
        (3, b'j"D"'),
    ]


def test_gather_in_application_code_runs_each_call_as_a_run() -> None:
    assert gather([word.bind("p"), word.bind("q")]) == ["P", "Q"]
    assert gather([]) == []
    assert asyncio.run(gather_async([aword.bind("r")])) == ["R"]


@pytest.mark.parametrize("bad", [word, word.bind("x"), "abc", 3, [word]])
def test_gather_refuses_what_is_not_an_iterable_of_bound_calls(bad: object) -> None:
    with pytest.raises(TypeError, match=r"gather\(\) takes one iterable of bound calls"):
        gather(bad)  # type: ignore[arg-type]
