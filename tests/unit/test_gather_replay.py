"""Async workflows that gather multi-step branches replay, whatever order calls finish in.

Hypothesis draws a tree of branches (``seq``: one after the other, ``par``: an
``asyncio.gather``, leaves: an async task) and how long each task takes, so calls
finish in a random order. The workflow runs once to its end; then, for every k, a run
of the same workflow crashes at its k-th task body and is resumed with other
durations (the order calls finish in changes again). Every run must end with the
tree's value, no task body that finished may run again, and the resumed history must
be the first run's history (same calls at the same positions). On memory and SQLite.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import durable
from durable import execute, task, workflow
from tests.unit.helpers import Crash

Tree = Any  # a leaf name (str), or ["seq" | "par", [Tree, ...]]

#: the test's state: how long each leaf sleeps, where to crash, which bodies ran.
state: dict[str, Any] = {"delays": {}, "crash_at": None, "bodies": Counter(), "count": 0}


@task
async def leaf(name: str) -> str:
    state["count"] += 1
    if state["count"] == state["crash_at"]:
        raise Crash
    await asyncio.sleep(state["delays"].get(name, 0) / 1000)
    state["bodies"][name] += 1
    return name


async def evaluate(tree: Tree) -> list[str]:
    if isinstance(tree, str):
        return [await leaf(tree)]
    kind, parts = tree
    if kind == "seq":
        out: list[str] = []
        for part in parts:
            out += await evaluate(part)
        return out
    results = await asyncio.gather(*(evaluate(part) for part in parts))
    return [name for result in results for name in result]


@workflow
async def gathered(tree: Tree) -> list[str]:
    return await evaluate(tree)


def durations(names: list[str], ms: list[int]) -> dict[str, int]:
    """How long each leaf sleeps (ms): one drawn duration per leaf, in order."""
    return {name: ms[i] for i, name in enumerate(names)}


def leaves(tree: Tree) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    return [name for part in tree[1] for name in leaves(part)]


def trees() -> st.SearchStrategy[Tree]:
    names = itertools.count()

    def node(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
        return st.tuples(
            st.sampled_from(["seq", "par"]), st.lists(children, min_size=1, max_size=3)
        )

    shape = st.recursive(st.just("leaf"), node, max_leaves=8)

    def named(tree: Tree) -> Tree:
        if tree == "leaf":
            return f"t{next(names)}"
        return [tree[0], [named(part) for part in tree[1]]]

    return shape.map(named)


delays = st.lists(st.sampled_from([0, 0, 1, 2, 3]), min_size=8, max_size=8)


@pytest.fixture(params=["memory", "sqlite"])
def gather_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[durable.Engine]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'g.db'}"
    engine = durable.configure(url, lease=5.0)
    try:
        yield engine
    finally:
        engine.close()


def _shape(engine: durable.Engine, run_id: str) -> list[tuple[int, str, str]]:
    return [(s.position, s.name, s.call_hash) for s in engine.backend.load_history(run_id)]


_runs = itertools.count()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tree=trees(), first=delays, second=delays)
def test_gathered_branches_replay_after_a_crash_at_every_step(
    gather_engine: durable.Engine, tree: Tree, first: list[int], second: list[int]
) -> None:
    """Crash at each task body in turn, resume with other durations: same value, same
    history as an uninterrupted run, every task body run exactly once."""
    names = leaves(tree)
    tag = next(_runs)
    state.update(delays=durations(names, first), crash_at=None, bodies=Counter(), count=0)
    assert execute(gathered, tree, id=f"whole-{tag}") == names  # gather keeps order
    whole = _shape(gather_engine, f"whole-{tag}")
    assert len(whole) == len(names)
    for k in range(1, len(names) + 1):
        run_id = f"crash-{tag}-{k}"
        state.update(delays=durations(names, first), crash_at=k, bodies=Counter(), count=0)
        with pytest.raises(Crash):
            execute(gathered, tree, id=run_id)
        before = Counter(state["bodies"])
        state.update(delays=durations(names, second), crash_at=None, bodies=Counter(), count=0)
        assert execute(gathered, tree, id=run_id) == names, f"resumed after crash {k}"
        ran = before + state["bodies"]
        assert ran == Counter(names), f"every body once (crash {k}): {before} then {ran}"
        assert _shape(gather_engine, run_id) == whole, f"same history (crash {k})"
