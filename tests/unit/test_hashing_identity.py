"""Call identity (`durable.core.hashing`): what makes two calls the same, whatever the
order dicts and sets were built in, and what makes them differ."""

from __future__ import annotations

import datetime as dt
import decimal
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable.core.hashing import HASH_VERSION, call_hash, canonical
from tests.unit._hashing_helpers import Color, Item, Shade, h

# -- identity basics ---------------------------------------------------------------------


def test_same_call_gives_same_versioned_hash() -> None:
    """Equal calls hash equally, as "v1:" and 32 hex digits."""
    first = h(a=1, b=["x", {"y": 2}])
    assert first == h(a=1, b=["x", {"y": 2}])
    assert re.fullmatch(r"v1:[0-9a-f]{32}", first)
    assert HASH_VERSION == "v1"


@pytest.mark.parametrize(
    "other",
    [
        call_hash("workflow", "app.f", {"a": 1}),
        call_hash("task", "app.g", {"a": 1}),
        call_hash("task", "app.f", {"a": 2}),
        call_hash("task", "app.f", {"b": 1}),
        call_hash("task", "app.f", {"a": 1, "b": None}),
        call_hash("task", "app.f", {}),
    ],
    ids=["kind", "name", "value", "parameter-name", "extra-argument", "no-arguments"],
)
def test_any_difference_in_the_call_changes_the_hash(other: str) -> None:
    """A different kind, name, argument name or argument value is a different call."""
    assert call_hash("task", "app.f", {"a": 1}) != other


def test_dict_key_order_does_not_matter() -> None:
    """Argument order and nested dict insertion order do not change the hash."""
    first = call_hash("task", "f", {"a": 1, "b": {"x": 1, "y": [1, {"p": 1, "q": 2}]}})
    second = call_hash("task", "f", {"b": {"y": [1, {"q": 2, "p": 1}], "x": 1}, "a": 1})
    assert first == second


def test_set_iteration_order_does_not_matter() -> None:
    """Sets that iterate in different orders (colliding hashes) still hash equally."""
    first, second = {-1, -2}, {-2, -1}  # hash(-1) == hash(-2): kept in insertion order
    assert list(first) != list(second)  # the precondition: really a different order
    assert canonical(first) == canonical(second)
    assert h(s=first) == h(s=second)
    assert h(s=frozenset(first)) == h(s=frozenset(second))


def test_set_and_frozenset_hash_alike() -> None:
    """A set and a frozenset with the same elements are one canonical value (as in ==)."""
    assert h(s={"a", "b"}) == h(s=frozenset({"b", "a"}))


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ([1, 2], (1, 2)),
        (1, 1.0),
        (1, True),
        (1.0, True),
        (0, False),
        (0, None),
        ("1", 1),
        ("", None),
        ([], {}),
        (b"ab", "ab"),
        ({"a": 1}, [("a", 1)]),
        (Color.RED, 1),
        (Color.RED, Shade.RED),
        (dt.date(2024, 1, 2), dt.datetime(2024, 1, 2)),
        (decimal.Decimal("1.0"), decimal.Decimal("1.00")),
        (decimal.Decimal(1), 1),
        ("ab", ["a", "b"]),
        (["ab", "c"], ["a", "bc"]),
        ({"a": "b=c"}, {"a=b": "c"}),
    ],
    ids=[
        "list-tuple",
        "int-float",
        "int-bool",
        "float-bool",
        "zero-false",
        "zero-none",
        "str-int",
        "empty-str-none",
        "list-dict",
        "bytes-str",
        "dict-pairs",
        "enum-int",
        "enum-classes",
        "date-datetime",
        "decimal-exponent",
        "decimal-int",
        "str-chars",
        "str-split",
        "dict-key-value-split",
    ],
)
def test_values_of_different_types_or_shapes_differ(left: Any, right: Any) -> None:
    """list/tuple, 1/1.0/True, enum/int and other look-alikes have different hashes."""
    assert canonical(left) != canonical(right)
    assert h(x=left) != h(x=right)


# -- property ----------------------------------------------------------------------------

_hashable = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4) | st.floats(allow_nan=False),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=4,
)
_value = st.recursive(
    _hashable,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
        | st.dictionaries(_hashable, inner, max_size=3)
        | st.sets(_hashable, max_size=5)
        | st.builds(Item, st.text(max_size=3), st.integers(), st.sets(st.text(max_size=3)))
    ),
    max_leaves=12,
)


def reordered(value: Any, rng: random.Random) -> Any:
    """An equal value whose dicts and sets were built in a shuffled order."""
    t = type(value)
    if t is dict:
        items = [(reordered(k, rng), reordered(v, rng)) for k, v in value.items()]
        rng.shuffle(items)
        return dict(items)
    if t is set or t is frozenset:
        elements = [reordered(v, rng) for v in value]
        rng.shuffle(elements)
        return t(elements)
    if t is list or t is tuple:
        return t(reordered(v, rng) for v in value)
    if t is Item:
        return Item(value.sku, value.qty, reordered(value.tags, rng))
    return value


@settings(max_examples=100, deadline=None, database=None)
@given(st.dictionaries(st.text(max_size=4), _value, max_size=4), st.randoms())
def test_property_hash_ignores_dict_and_set_construction_order(
    arguments: dict[str, Any], rng: random.Random
) -> None:
    """Rebuilding every dict and set in a shuffled order never changes the hash."""
    shuffled = reordered(arguments, rng)
    assert shuffled == arguments
    assert call_hash("task", "f", shuffled) == call_hash("task", "f", arguments)
