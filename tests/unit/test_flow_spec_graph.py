"""Flow files (issue 18): the task graph of a spec, its order, dependents and
descendants, found without recursion for a thousand tasks."""

from __future__ import annotations

import json
import random
import time

import pytest

from durable.errors import FlowFileError
from durable.flows.spec import loads
from tests.unit._flow_spec_helpers import HEAD

DIAMOND = HEAD + (
    '[task.top]\ncommand = ["t"]\n'
    '[task.right]\ncommand = ["r"]\ndepends_on = ["top"]\n'
    '[task.left]\ncommand = ["l"]\ndepends_on = ["top"]\n'
    '[task.alone]\ncommand = ["x"]\n'
    '[task.bottom]\ncommand = ["b"]\ndepends_on = ["left", "right"]\n'
    '[task.after]\ncommand = ["z"]\ndepends_on = ["bottom"]\n'
)


def test_order_dependents_descendants_of_a_diamond() -> None:
    """Order puts dependencies first and breaks ties by file order; dependents are
    direct, descendants transitive and in topological order."""
    spec = loads(DIAMOND)
    assert spec.order() == ["top", "right", "left", "alone", "bottom", "after"]
    assert spec.dependents("top") == ["right", "left"]
    assert spec.dependents("left") == ["bottom"]
    assert spec.dependents("after") == []
    assert spec.descendants("top") == ["right", "left", "bottom", "after"]
    assert spec.descendants("left") == ["bottom", "after"]
    assert spec.descendants("alone") == []
    with pytest.raises(KeyError, match="no task 'nope'"):
        spec.descendants("nope")


def test_a_thousand_task_chain() -> None:
    """A chain 1,000 deep loads fast (no recursion), in order; closing it is a cycle
    found without recursion either."""
    lines = [HEAD, '[task.t0]\ncommand = ["true"]\n']
    for i in range(1, 1000):
        lines.append(f'[task.t{i}]\ncommand = ["true"]\ndepends_on = ["t{i - 1}"]\n')
    text = "".join(lines)
    started = time.perf_counter()
    spec = loads(text)
    assert time.perf_counter() - started < 2
    assert spec.order() == [f"t{i}" for i in range(1000)]
    assert spec.descendants("t0") == [f"t{i}" for i in range(1, 1000)]
    closed = text.replace(
        '[task.t0]\ncommand = ["true"]\n', '[task.t0]\ncommand = ["true"]\ndepends_on = ["t999"]\n'
    )
    with pytest.raises(FlowFileError) as caught:
        loads(closed)
    assert caught.value.key == "task.t0.depends_on"
    assert (
        "cycle: t0 -> t999 -> t998 -> " in str(caught.value)
        and str(caught.value).count("->") == 1000
    )


def test_a_random_dag_of_a_thousand_tasks() -> None:
    """1,000 tasks with random dependencies, written in shuffled order, load in well
    under 2 s; the order keeps every dependency first, descendants are exact."""
    rng = random.Random(18)
    deps = {
        f"n{i}": rng.sample([f"n{j}" for j in range(i)], min(i, rng.randint(0, 4)))
        for i in range(1000)
    }
    names = list(deps)
    rng.shuffle(names)
    text = (
        HEAD
        + "max_running = 16\n"
        + "".join(
            f'[task.{name}]\ncommand = ["true"]\ndepends_on = {json.dumps(deps[name])}\n'
            for name in names
        )
    )
    started = time.perf_counter()
    spec = loads(text)
    assert time.perf_counter() - started < 2
    position = {name: index for index, name in enumerate(spec.order())}
    assert sorted(position) == sorted(deps)
    assert all(position[need] < position[name] for name, needs in deps.items() for need in needs)
    below = {name for name in deps if "n0" in deps[name]}
    grown = True
    while grown:
        more = {name for name in deps if set(deps[name]) & below} - below
        grown = bool(more)
        below |= more
    assert set(spec.descendants("n0")) == below
    assert [n for n in spec.order() if n in below] == spec.descendants("n0")
