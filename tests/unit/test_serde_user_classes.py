"""Payload encoding (`durable.core.serde`) of user classes: dataclasses load without
running their __init__/__post_init__, pydantic models round-trip in their own JSON mode."""

from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress

import pydantic
import pytest

from durable.core.serde import dumps, loads
from durable.errors import SerializationError
from tests.unit._serde_helpers import (
    HERE,
    POST_INIT_CALLS,
    Address,
    Derived,
    Host,
    _reset_call_logs,  # noqa: F401 (autouse fixture)
    roundtrip,
)

# -- module-level types (importable by name, as tags require) -------------------------


@dataclasses.dataclass
class NeverAssigned:
    x: int
    later: int = dataclasses.field(init=False)


class Person(pydantic.BaseModel):
    name: str
    born: dt.date
    address: Address
    scores: tuple[int, ...] = ()
    tags: set[str] = set()


class Opaque:
    """Neither JSON nor a tag: only Python mode (and pickle) can hold it."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque)

    def __hash__(self) -> int:
        return 0


class Holder(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque


def test_dataclass_post_init_is_not_run_on_load() -> None:
    """Loading a dataclass restores its state without running __init__/__post_init__."""
    value = Derived(3)
    assert POST_INIT_CALLS == [3]
    loaded = roundtrip(value)
    assert POST_INIT_CALLS == [3]
    assert type(loaded) is Derived
    assert (loaded.x, loaded.doubled, loaded.label) == (3, 6, "x=3")


def test_dataclass_attributes_derived_in_post_init_survive() -> None:
    """Attributes __post_init__ set outside the fields are state too (it is not re-run)."""
    loaded = roundtrip(Derived(4))
    assert loaded.note == "not a field"
    assert vars(loaded) == vars(Derived(4))


def test_dataclass_field_never_assigned_stays_unassigned() -> None:
    """An init=False field that was never set is simply absent after load, not an error."""
    loaded = roundtrip(NeverAssigned(1))
    assert loaded.x == 1
    assert not hasattr(loaded, "later")


def test_pydantic_models_round_trip() -> None:
    """Pydantic v2 models load back as the same model class with equal, typed fields."""
    value = Person(
        name="Ada",
        born=dt.date(1815, 12, 10),
        address=Address(city="London", zip_code="W1"),
        scores=(1, 2),
        tags={"math"},
    )
    loaded = roundtrip({"p": [value]})["p"][0]
    assert type(loaded) is Person
    assert type(loaded.address) is Address
    assert loaded == value
    assert type(loaded.born) is dt.date
    assert type(loaded.scores) is tuple


def test_pydantic_models_use_their_own_json_mode() -> None:
    """A field pydantic writes as JSON (an IPv4Address) needs no pickle: the model is
    stored in its JSON mode and read back by model_validate_json."""
    value = Host(
        ip=ipaddress.IPv4Address("10.0.0.7"),
        net=ipaddress.IPv4Network("10.0.0.0/24"),
        seen=dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC),
    )
    data = dumps(value, allow_pickle=False, where="v")
    assert b'"json":{"ip":"10.0.0.7","net":"10.0.0.0/24"' in data
    assert loads(data, allow_pickle=False) == value


def test_pydantic_payloads_of_the_python_mode_still_load() -> None:
    """Models stored before (Python mode, durable's tags) load as they did."""
    old = (
        b'j{"$durable":"pydantic","cls":"' + HERE.encode() + b':Address",'
        b'"v":{"city":"Paris","zip_code":"75001"}}'
    )
    assert loads(old, allow_pickle=False) == Address(city="Paris", zip_code="75001")


def test_a_model_json_cannot_write_falls_back_to_its_python_mode() -> None:
    """An arbitrary type in a field: Python mode, which pickles it when allowed."""
    value = Holder(thing=Opaque())
    assert roundtrip(value, allow_pickle=True) == value
    with pytest.raises(SerializationError):
        dumps(value, allow_pickle=False, where="v")
