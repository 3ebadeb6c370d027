"""Call identity (`durable.core.hashing`) of rich values: nested dataclasses, enums,
objects, functions, huge ints, shared and self-referencing values hash by value."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import sys
import uuid
from typing import Any

import pytest

from durable.core.hashing import canonical
from tests.unit._hashing_helpers import (
    HERE,
    Account,
    Color,
    Item,
    Name,
    Opaque,
    h,
    linked,
)

# -- module-level types ------------------------------------------------------------------


@dataclasses.dataclass
class OtherItem:
    sku: str
    qty: int
    tags: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class Lazy:
    x: int
    later: int = dataclasses.field(init=False)


class Ledger:
    def __init__(self, owner: str, balance: int) -> None:
        self.owner = owner
        self.balance = balance


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
