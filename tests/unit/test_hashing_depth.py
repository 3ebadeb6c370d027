"""Call identity (`durable.core.hashing`) of deep values: the whole value is hashed at
every depth and without recursion, and the canonical form is byte for byte the old
encoder's for every value within its 64 levels."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable.core.hashing import canonical
from tests.unit import _hashing_reference as reference
from tests.unit._hashing_helpers import (
    Account,
    Color,
    Item,
    Name,
    Opaque,
    Shade,
    h,
    linked,
)

# -- module-level types ------------------------------------------------------------------


@dataclasses.dataclass
class Box:
    content: Any


def _nested(depth: int, leaf: Any, kind: str) -> Any:
    """*leaf* under *depth* levels of containers of one *kind*."""
    value = leaf
    for level in range(depth):
        if kind == "list":
            value = [value]
        elif kind == "dict":
            value = {"k": value, "n": level}
        elif kind == "tuple-set":
            value = (frozenset({value}),)
        else:  # objects, dataclasses and dicts in turn
            value = (Account("a", value), Box(value), {"v": value})[level % 3]
    return value


@pytest.mark.parametrize("kind", ["list", "dict", "tuple-set", "mixed"])
@pytest.mark.parametrize("depth", [65, 70, 200])
def test_values_differing_only_below_depth_64_hash_differently(kind: str, depth: int) -> None:
    """The whole value is hashed, at every depth: the old encoder wrote only the type
    past 64 levels, so execute(wf, deep_b, id=...) returned deep_a's result."""
    assert h(x=_nested(depth, 1, kind)) != h(x=_nested(depth, 2, kind))
    assert h(x=_nested(depth, 1, kind)) == h(x=_nested(depth, 1, kind))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["list", "dict", "tuple-set"])
def test_a_100000_deep_value_hashes_without_recursion(kind: str) -> None:
    """No recursion: nesting as deep as memory allows hashes, in linear time."""
    deep = _nested(100_000, "leaf", kind)
    assert h(x=deep) == h(x=_nested(100_000, "leaf", kind))
    assert h(x=deep) != h(x=_nested(100_000, "leaf!", kind))


def _up_to_64(leaf: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(st.text(max_size=3) | st.integers(-3, 3), inner, max_size=3),
            st.frozensets(st.text(max_size=2) | st.integers(-3, 3), max_size=3),
            st.builds(Item, st.text(max_size=3), st.integers(), st.sets(st.text(max_size=2))),
            st.builds(Account, st.text(max_size=3), inner),
            st.sampled_from(Color),
        ),
        max_leaves=20,
    )


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.binary(max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(value=_up_to_64(SCALARS))
def test_canonical_form_is_unchanged_within_the_old_depth(value: Any) -> None:
    """Byte for byte the old encoder's output for values it saw whole (depth <= 64), so
    hashes stored in histories still match after the upgrade."""
    assert canonical(value) == reference.canonical(value)
    assert h(x=value, y=[value]) == reference.call_hash("task", "app.f", {"x": value, "y": [value]})


def _chain(depth: int, leaf: Any) -> Any:
    value = leaf
    for n in range(depth):
        value = [value, {"n": n}] if n % 2 else {"d": value, frozenset({n}): n}
    return value


def test_canonical_form_is_unchanged_up_to_depth_64_exactly() -> None:
    """At the old limit itself, with cycles, weak keys and key texts that are prefixes
    of one another (the sorted-items fallback) on the way."""
    cycle: list[Any] = [1]
    cycle.append({"self": cycle, Opaque(1): 2, Opaque(2): 3})
    odd_keys = {Name("a"): 1, "a": 2, Color.RED: 3, Shade.RED: 4, (1,): 5, (1, 2): 6}
    for depth, leaf in ((60, cycle), (63, odd_keys), (50, linked(5))):
        value = _chain(depth, leaf)
        assert canonical(value) == reference.canonical(value)
        # An argument sits one level down, in the arguments' dict.
        value = _chain(depth - 1, leaf)
        assert h(x=value) == reference.call_hash("task", "app.f", {"x": value})
