"""Call identity (`durable.core.hashing`): what makes two calls the same, and that the hash
is the same in every process whatever PYTHONHASHSEED says."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import importlib
import itertools
import os
import random
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import durable
from durable.core.hashing import HASH_VERSION, call_hash, canonical
from tests.unit import _hashing_reference as reference

HERE = __name__


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Shade(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Item:
    sku: str
    qty: int
    tags: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class OtherItem:
    sku: str
    qty: int
    tags: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class Box:
    content: Any


@dataclasses.dataclass
class Lazy:
    x: int
    later: int = dataclasses.field(init=False)


class Account:
    def __init__(self, owner: str, balance: int) -> None:
        self.owner = owner
        self.balance = balance


class Ledger:
    def __init__(self, owner: str, balance: int) -> None:
        self.owner = owner
        self.balance = balance


class Opaque:
    """Nothing to look at: no __dict__, no fields."""

    __slots__ = ("secret",)

    def __init__(self, secret: int) -> None:
        self.secret = secret


class Mixin:
    """Takes no constructor arguments: calling Mixin("abc") raises TypeError."""

    def describe(self) -> str:
        return "mixed in"


class Name(str, Mixin):
    __slots__ = ()


class Node:
    def __init__(self, value: int) -> None:
        self.value = value
        self.prev: Node | None = None
        self.next: Node | None = None


def h(**arguments: Any) -> str:
    return call_hash("task", "app.f", arguments)


def linked(n: int) -> Node:
    nodes = [Node(i) for i in range(n)]
    for a, b in itertools.pairwise(nodes):
        a.next, b.prev = b, a
    return nodes[0]


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


# -- rich values -------------------------------------------------------------------------


def rich() -> dict[str, Any]:
    """A fresh nested argument with every supported kind of value."""
    return {
        "items": [Item("a", 1, {"x", "y"}), Item("b", 2)],
        "by_id": {uuid.UUID(int=7): {"when": dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC)}},
        "money": (decimal.Decimal("10.50"), Color.BLUE),
        "blob": b"\x00\x01",
        "groups": {frozenset({"a", "b"}): {"c", "d"}},
        "spans": [dt.timedelta(hours=1), dt.date(2024, 1, 1), dt.time(9, 30)],
        "account": Account("ann", 10),
    }


def test_rich_nested_values_hash_by_value() -> None:
    """Separately built but equal nested values (dataclasses, enums, ...) hash equally."""
    assert h(x=rich()) == h(x=rich())


MUTATIONS = {
    "dataclass-field": lambda d: setattr(d["items"][0], "qty", 2),
    "dataclass-set-field": lambda d: d["items"][1].tags.add("z"),
    "dataclass-class": lambda d: d["items"].__setitem__(0, OtherItem("a", 1, {"x", "y"})),
    "uuid": lambda d: d.__setitem__("by_id", {uuid.UUID(int=8): d["by_id"][uuid.UUID(int=7)]}),
    "datetime": lambda d: d["by_id"][uuid.UUID(int=7)].__setitem__(
        "when", dt.datetime(2024, 5, 1, 12, 0, 1, tzinfo=dt.UTC)
    ),
    "timezone": lambda d: d["by_id"][uuid.UUID(int=7)].__setitem__(
        "when", dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    ),
    "decimal": lambda d: d.__setitem__("money", (decimal.Decimal("10.5"), Color.BLUE)),
    "enum": lambda d: d.__setitem__("money", (decimal.Decimal("10.50"), Color.RED)),
    "bytes": lambda d: d.__setitem__("blob", b"\x00\x02"),
    "set-in-dict-value": lambda d: d["groups"][frozenset({"a", "b"})].add("e"),
    "frozenset-key": lambda d: d.__setitem__("groups", {frozenset({"a"}): {"c", "d"}}),
    "timedelta": lambda d: d["spans"].__setitem__(0, dt.timedelta(hours=2)),
    "time": lambda d: d["spans"].__setitem__(2, dt.time(9, 31)),
    "object-state": lambda d: setattr(d["account"], "balance", 11),
    "object-class": lambda d: d.__setitem__("account", Ledger("ann", 10)),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_changing_any_nested_value_changes_the_hash(mutate: Any) -> None:
    """A change anywhere inside a nested argument, of any supported kind, is detected."""
    changed = rich()
    mutate(changed)
    assert h(x=changed) != h(x=rich())


def test_objects_with_dict_hash_by_class_and_state() -> None:
    """Plain objects compare by class and __dict__, not by identity."""
    assert h(a=Account("ann", 1)) == h(a=Account("ann", 1))
    assert h(a=Account("ann", 1)) != h(a=Account("ann", 2))
    assert h(a=Account("ann", 1)) != h(a=Ledger("ann", 1))


def test_opaque_objects_are_a_weak_identity() -> None:
    """Objects with nothing to inspect hash by class name only: their state is not seen."""
    assert h(o=Opaque(1)) == h(o=Opaque(2))  # documented weakness: state is invisible
    assert h(o=object()) == h(o=object())
    assert h(o=Opaque(1)) != h(o=object())
    assert canonical(Opaque(1)) == f"w{HERE}.Opaque;"


def test_functions_and_classes_hash_by_qualified_name() -> None:
    """Functions and classes are identified by qualified name (or their durable_name)."""

    def helper() -> None: ...

    assert canonical(linked) == f"F{HERE}.linked;"
    assert canonical(Item) == f"F{HERE}.Item;"
    assert h(f=helper) != h(f=linked)
    helper.durable_name = "jobs.helper"
    assert canonical(helper) == "Fjobs.helper;"


def test_scalar_subclass_keeps_class_and_uses_its_builtin_base() -> None:
    """A str subclass with a mixin hashes by class + text, not by calling the mixin."""
    assert canonical(Name("abc")) == f"x{HERE}.Name:s3:abc"
    assert h(n=Name("abc")) != h(n="abc")


def test_dataclass_with_unassigned_field_hashes() -> None:
    """An init=False field that was never set is left out rather than raising."""
    assert h(x=Lazy(1)) == h(x=Lazy(1))
    assert h(x=Lazy(1)) != h(x=Lazy(2))


def test_huge_ints_hash_regardless_of_the_digit_limit() -> None:
    """Ints past Python's int-to-str digit limit hash, with the same decimal text it'd give."""
    big = 10**5000 + 3
    text = canonical(big)
    assert h(x=big) != h(x=big + 1)
    previous = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # unlimited: str() works, and must agree
    try:
        assert text == f"i{big};"
        assert canonical(-big) == f"i{-big};"
    finally:
        sys.set_int_max_str_digits(previous)
    assert canonical(-big) == f"i-{text[1:]}"


def test_shared_sub_values_hash_like_copies() -> None:
    """The same object appearing twice hashes like two equal copies (no aliasing in hashes)."""
    shared = [1, {"a": 2}]
    assert canonical([shared, shared]) == canonical([[1, {"a": 2}], [1, {"a": 2}]])
    item = Item("a", 1)
    assert canonical({"x": item, "y": item}) == canonical({"x": Item("a", 1), "y": Item("a", 1)})


def test_self_referencing_values_hash_stably() -> None:
    """A value that contains itself hashes, equal to an identically built one."""

    def build() -> list[Any]:
        cycle: list[Any] = [1]
        cycle.append({"self": cycle})
        return cycle

    assert canonical(build()) == canonical(build())
    other = build()
    other[0] = 2
    assert canonical(other) != canonical(build())


@pytest.mark.timeout(20)
def test_doubly_linked_objects_hash_quickly() -> None:
    """Back-references (prev/next, parent/children) do not make hashing exponential."""
    assert h(x=linked(200)) == h(x=linked(200))
    changed = linked(200)
    assert changed.next is not None
    changed.next.value = -1
    assert h(x=changed) != h(x=linked(200))


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


# -- stable across processes -------------------------------------------------------------

PROBE = textwrap.dedent(
    '''
    """Computes one call hash over seed-sensitive arguments, and a pickle digest."""
    import dataclasses
    import hashlib
    import pickle

    from durable.core.hashing import call_hash

    WORDS = [f"word-{i}" for i in range(40)]


    @dataclasses.dataclass(frozen=True)
    class Shipment:
        sku: str
        tags: frozenset
        meta: dict


    def arguments():
        return {
            "tags": set(WORDS),
            "frozen": frozenset(WORDS[::3]),
            "nested": {
                "b": {"y": set(WORDS[:9]), "x": [1, ("t", 2.5)]},
                "a": {"z": frozenset({"q", "r", "s"}), "w": {w: len(w) for w in WORDS[:6]}},
            },
            "shipment": Shipment("sku-1", frozenset(WORDS[:7]), {"k": set(WORDS[5:12])}),
        }


    def report():
        print(call_hash("task", "shop.ship", arguments()))
        print(hashlib.sha256(pickle.dumps(set(WORDS))).hexdigest())
    '''
)


@pytest.fixture
def probe(tmp_path: Path) -> Any:
    """The probe module, written to tmp_path and imported in this process too."""
    (tmp_path / "durable_hash_probe.py").write_text(PROBE)
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield importlib.import_module("durable_hash_probe")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("durable_hash_probe", None)


def test_call_hash_is_identical_under_every_hash_seed(probe: Any, tmp_path: Path) -> None:
    """Subprocesses under PYTHONHASHSEED 0-3 and random agree with this process's hash."""
    src = Path(durable.__file__).resolve().parent.parent
    seeds = ["0", "1", "2", "3", "random"]
    processes = []
    for seed in seeds:
        env = {
            **os.environ,
            "PYTHONHASHSEED": seed,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(src)]),
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", "import durable_hash_probe as p; p.report()"],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        results.append(out.split())
    call_hashes = {seed: lines[0] for seed, lines in zip(seeds, results, strict=True)}
    pickle_digests = {seed: lines[1] for seed, lines in zip(seeds, results, strict=True)}

    in_process = call_hash("task", "shop.ship", probe.arguments())
    assert set(call_hashes.values()) == {in_process}, call_hashes
    # Control: hashing pickle bytes would NOT be stable, so this test can see the problem.
    assert len(set(pickle_digests.values())) > 1, pickle_digests


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


GOLDEN = [
    (("task", "app.fetch", {"n": 3}), "v1:ae786eaa96288c6a38f32e9830d6f6fb"),
    (
        ("task", "app.fetch", {"n": 3, "scale": 1.5, "label": "x", "flag": True, "none": None}),
        "v1:f3ad8177d0f143efbed8170ccedfd9a5",
    ),
    (
        (
            "workflow",
            "app.pipeline",
            {"items": [1, "a", (2, 3)], "tags": {"b", "a"}, "meta": {"k": {"z": 1, "y": [None]}}},
        ),
        "v1:ac22246a2ac326cfcb368fea4d113e6d",
    ),
    (
        (
            "task",
            "app.when",
            {
                "at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
                "amount": decimal.Decimal("1.10"),
                "id": uuid.UUID(int=7),
                "raw": b"\x00\xff",
            },
        ),
        "v1:5f18b7b1e54d2abfdfa5e107a0e2627c",
    ),
    (("now", "durable.now", {}), "v1:fde22e9bf4da3fb21baa92becda826fa"),
]


@pytest.mark.parametrize(("call", "expected"), GOLDEN)
def test_v1_hashes_never_change(call: tuple[str, str, dict[str, Any]], expected: str) -> None:
    """Stored histories hold v1 hashes: the same call must hash to the same value forever."""
    assert call_hash(*call) == expected
