"""Payload encoding (`durable.core.serde`): exact round-trips, the pickle boundary, corrupt
rows and recorded exceptions."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import errno
import ipaddress
import json
import math
import pickle
import threading
import traceback
import uuid
import zoneinfo
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cloudpickle
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable.core import serde as _serde
from durable.core.encoding import Encoder
from durable.core.error_payloads import dump_error, load_error
from durable.core.serde import dumps, loads
from durable.errors import (
    NondeterminismError,
    PayloadError,
    PickleRefused,
    RecordedError,
    SerializationError,
)

HERE = __name__
PARIS = zoneinfo.ZoneInfo("Europe/Paris")

# -- module-level types (importable by name, as tags require) -------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = (0, 255, 0)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Perm(enum.Flag):
    R = 4
    W = 2


@dataclasses.dataclass
class Inner:
    name: str
    tags: frozenset[str]


@dataclasses.dataclass
class Outer:
    inner: Inner
    items: list[Inner]
    when: dt.datetime
    mapping: dict[tuple[int, int], Inner]


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: int
    y: tuple[int, ...]


@dataclasses.dataclass(slots=True)
class Slotted:
    a: int
    b: str = "b"


POST_INIT_CALLS: list[Any] = []


@dataclasses.dataclass
class Derived:
    """Counts __post_init__ runs and derives state in it (both init=False)."""

    x: int
    doubled: int = dataclasses.field(init=False)
    label: str = dataclasses.field(init=False, default="unset")

    def __post_init__(self) -> None:
        POST_INIT_CALLS.append(self.x)
        self.doubled = self.x * 2
        self.label = f"x={self.x}"
        self.note = "not a field"  # derived, outside the declared fields


@dataclasses.dataclass
class NeverAssigned:
    x: int
    later: int = dataclasses.field(init=False)


class Address(pydantic.BaseModel):
    city: str
    zip_code: str


class Person(pydantic.BaseModel):
    name: str
    born: dt.date
    address: Address
    scores: tuple[int, ...] = ()
    tags: set[str] = set()


class Host(pydantic.BaseModel):
    """Fields pydantic writes as JSON but durable has no tag for."""

    ip: ipaddress.IPv4Address
    net: ipaddress.IPv4Network
    seen: dt.datetime


class Opaque:
    """Neither JSON nor a tag: only Python mode (and pickle) can hold it."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque)

    def __hash__(self) -> int:
        return 0


class Holder(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque


class Point:
    """A plain class: only pickle can store it."""

    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)

    def __hash__(self) -> int:
        return hash((self.x, self.y))


TRAP_CALLS: list[str] = []


class Trap:
    """Not a dataclass, Enum, model or exception; records any attempt to build it."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Trap:
        TRAP_CALLS.append("__new__")
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        TRAP_CALLS.append("__init__")


class Touch:
    """Unpickling this creates a file: proof that a pickle was (or was not) loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


class CodedError(Exception):
    def __init__(self, code: int, msg: str) -> None:
        super().__init__(msg)
        self.code = code


class Exploding(pydantic.BaseModel):
    x: int

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("dump exploded")


class BadStrError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


# -- helpers ---------------------------------------------------------------------------


def roundtrip(value: Any, *, allow_pickle: bool = False) -> Any:
    return loads(dumps(value, allow_pickle=allow_pickle, where="v"), allow_pickle=allow_pickle)


def assert_same(original: Any, loaded: Any) -> None:
    """Equal, and of exactly the same type all the way down (1 is not 1.0 nor True)."""
    assert type(loaded) is type(original), (original, loaded)
    if isinstance(original, float):
        if math.isnan(original):
            assert math.isnan(loaded)
        else:
            assert loaded == original
            assert math.copysign(1.0, loaded) == math.copysign(1.0, original)
    elif isinstance(original, decimal.Decimal):
        assert str(loaded) == str(original)
    elif isinstance(original, list | tuple):
        assert len(loaded) == len(original)
        for a, b in zip(original, loaded, strict=True):
            assert_same(a, b)
    elif isinstance(original, dict):
        assert len(loaded) == len(original)
        for (ka, va), (kb, vb) in zip(original.items(), loaded.items(), strict=True):
            assert_same(ka, kb)
            assert_same(va, vb)
    elif isinstance(original, set | frozenset):
        assert len(loaded) == len(original)
        for a in original:
            matches = [b for b in loaded if b == a]
            assert len(matches) == 1, (a, loaded)
            assert_same(a, matches[0])
    elif isinstance(original, dt.datetime | dt.time):
        assert loaded == original
        assert loaded.tzinfo == original.tzinfo
        assert loaded.fold == original.fold
        if isinstance(original, dt.datetime):
            assert loaded.utcoffset() == original.utcoffset()
    elif dataclasses.is_dataclass(original):
        for field in dataclasses.fields(original):
            assert_same(getattr(original, field.name), getattr(loaded, field.name))
    else:
        assert loaded == original


def pickle_tag(obj: Any) -> dict[str, str]:
    return {"$durable": "pickle", "v": base64.b64encode(pickle.dumps(obj)).decode("ascii")}


def catch(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except BaseException as error:
        return error
    raise AssertionError("expected an exception")


@pytest.fixture(autouse=True)
def _reset_call_logs() -> None:
    POST_INIT_CALLS.clear()
    TRAP_CALLS.clear()


# -- round-trips -----------------------------------------------------------------------

ROUND_TRIP = {
    "none": None,
    "true": True,
    "false": False,
    "zero": 0,
    "negative": -17,
    "int64-overflow": 2**63 + 1,
    "huge-int": 10**5000,
    "huge-negative-int": -(10**5000) - 7,
    "int-at-json-width": 2**2048 - 1,
    "int-past-json-width": 2**2048,
    "float": 1.5,
    "float-tiny": 5e-324,
    "float-big": 1.7976931348623157e308,
    "nan": math.nan,
    "inf": math.inf,
    "-inf": -math.inf,
    "-0.0": -0.0,
    "empty-str": "",
    "unicode": "héllo wörld ✓ 日本語 🎉",
    "control-chars": '\x00\x01\n\t"\\',
    "tag-text": "$durable",
    "lone-surrogate": "bad \udcff byte",  # os.fsdecode makes these
    "empty-list": [],
    "list": [1, "a", None, 2.5, [True]],
    "empty-dict": {},
    "str-dict": {"a": 1, "b": [2, 3], "": None},
    "int-keys": {1: "one", 2: "two"},
    "tuple-keys": {(1, 2): "a", (3, (4, 5)): "b"},
    "mixed-keys": {None: 0, 2.5: 1, frozenset({1}): 2, "s": 3, False: 4},
    "tag-key": {"$durable": "pickle", "v": "not really a pickle"},
    "tag-key-alone": {"$durable": None},
    "nested-tag-key": [{"$durable": "dict", "v": [[1, 2]]}],
    "empty-tuple": (),
    "tuple": (1, (2, 3), [4]),
    "set": {1, "two", (3, 4)},
    "empty-set": set(),
    "frozenset": frozenset({"a", "b"}),
    "empty-frozenset": frozenset(),
    "bytes": b"\x00\x01\xffNUL\x00",
    "empty-bytes": b"",
    "bytearray": bytearray(b"\x00ab\x00"),
    "naive-datetime": dt.datetime(2024, 2, 29, 23, 59, 58, 123456),
    "utc-datetime": dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
    "offset-datetime": dt.datetime(2024, 1, 1, 5, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
    "zoneinfo-datetime": dt.datetime(2024, 7, 1, 12, tzinfo=PARIS),
    "zoneinfo-fold": dt.datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=PARIS),
    "naive-fold": dt.datetime(2024, 10, 27, 2, 30, fold=1),
    "date": dt.date(1999, 12, 31),
    "time": dt.time(23, 59, 59, 999999),
    "aware-time": dt.time(8, 30, tzinfo=dt.UTC),
    "zoneinfo-time": dt.time(8, 30, tzinfo=PARIS),
    "time-fold": dt.time(2, 30, fold=1),
    "timedelta": dt.timedelta(days=-3, seconds=5, microseconds=7),
    "decimal": decimal.Decimal("1.10"),
    "decimal-negative-zero": decimal.Decimal("-0.000"),
    "decimal-huge": decimal.Decimal("1E+400"),
    "decimal-inf": decimal.Decimal("-Infinity"),
    "decimal-nan": decimal.Decimal("NaN"),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "enum": Color.RED,
    "enum-tuple-value": Color.GREEN,
    "int-enum": Level.HIGH,
    "flag-combination": Perm.R | Perm.W,
    "frozen-dataclass": Frozen(1, (2, 3)),
    "slots-dataclass": Slotted(5),
    "nested-dataclass": Outer(
        inner=Inner("a", frozenset({"x"})),
        items=[Inner("b", frozenset())],
        when=dt.datetime(2020, 1, 1, tzinfo=dt.UTC),
        mapping={(1, 2): Inner("c", frozenset({"y", "z"}))},
    ),
    "mixture": {
        "when": [dt.date(2020, 1, 1), dt.timedelta(0)],
        "ids": {uuid.UUID(int=1), uuid.UUID(int=2)},
        "money": (decimal.Decimal("0.1"), Level.LOW),
        "blob": {b"k": bytearray(b"v")},
        "level": [{Level.LOW: Color.RED}],
    },
}


@pytest.mark.parametrize("value", ROUND_TRIP.values(), ids=ROUND_TRIP.keys())
def test_round_trip_preserves_value_and_exact_types(value: Any) -> None:
    """Every supported type loads back equal and of exactly the same type, deep down."""
    payload = dumps(value, allow_pickle=False, where="v")
    assert payload[:1] == b"j"
    assert_same(value, loads(payload, allow_pickle=False))


def test_round_trip_is_the_same_with_pickling_allowed() -> None:
    """Allowing pickles does not change how taggable values are stored."""
    for value in ROUND_TRIP.values():
        assert dumps(value, allow_pickle=True, where="v") == dumps(
            value, allow_pickle=False, where="v"
        )


_FLAT_VALUES = st.one_of(
    st.integers(), st.integers(min_value=2**2040, max_value=2**2100), st.text(),
    st.booleans(), st.none(), st.floats(allow_nan=True), st.binary(max_size=4),
)  # fmt: skip


@settings(max_examples=300)
@given(st.dictionaries(st.one_of(st.text(), st.just(_serde.TAG), st.integers()), _FLAT_VALUES))
def test_flat_dicts_take_a_shortcut_to_the_same_bytes(value: dict[Any, Any]) -> None:
    """A dict of str keys and int/str/bool/None values (a task's arguments) is written
    without the general encoder, to exactly the bytes the general encoder writes; any
    other dict (a float, bytes, a non-str or the tag key, a lone surrogate) is left to
    it."""
    general = b"j" + _serde._json_bytes(Encoder(allow_pickle=False).encode(value))
    flat = _serde._flat_dict(value)
    plain = all(
        type(k) is str and k != _serde.TAG and type(v) in (int, str, bool, type(None))
        for k, v in value.items()
    )
    if plain:
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            plain = False
    assert (flat is not None) == plain
    assert dumps(value, allow_pickle=False, where="v") == general
    assert_same(value, loads(general, allow_pickle=False))


def test_int_bool_float_stay_distinct() -> None:
    """1, 1.0 and True are three different payloads and three different loaded types."""
    payloads = {dumps(v, allow_pickle=False, where="v") for v in (1, 1.0, True)}
    assert len(payloads) == 3
    assert [type(roundtrip(v)) for v in (1, 1.0, True)] == [int, float, bool]


def test_huge_ints_are_stored_as_hex_tags_not_decimal_text() -> None:
    """Ints past 2048 bits are hex-tagged, so the interpreter's digit limit never applies."""
    payload = dumps([10**5000], allow_pickle=False, where="v")
    tree = json.loads(payload[1:])
    assert tree[0]["$durable"] == "int"
    assert int(tree[0]["v"], 16) == 10**5000
    assert dumps(2**2048 - 1, allow_pickle=False, where="v") == b"j" + str(2**2048 - 1).encode()


def test_zoneinfo_datetimes_keep_their_zone() -> None:
    """A ZoneInfo datetime loads in the same zone, so later DST arithmetic is unchanged."""
    value = dt.datetime(2024, 3, 30, 12, tzinfo=PARIS)
    loaded = roundtrip(value)
    assert loaded.tzinfo is PARIS
    one_day = dt.timedelta(days=1)  # crosses the spring-forward night
    assert (loaded + one_day).utcoffset() == (value + one_day).utcoffset()
    assert (loaded + one_day).isoformat() == (value + one_day).isoformat()


def test_plain_dict_payload_is_readable_json() -> None:
    """A dict of JSON types is stored as the same JSON object, readable without durable."""
    payload = dumps({"a": [1, "x", None], "b": {"c": 2.5}}, allow_pickle=False, where="v")
    assert payload == b'j{"a":[1,"x",null],"b":{"c":2.5}}'


def test_user_dict_holding_the_tag_key_is_not_taken_for_a_tag() -> None:
    """A user's {"$durable": "pickle"} dict is wrapped, so it loads as data, not a pickle."""
    value = {"$durable": "pickle", "v": base64.b64encode(b"junk").decode()}
    payload = dumps(value, allow_pickle=False, where="v")
    assert payload[:1] == b"j"
    assert json.loads(payload[1:])["$durable"] == "dict"
    assert loads(payload, allow_pickle=True) == value


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


# A recursive strategy over everything the tags express (no pickles).
_hashable_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**3000), max_value=2**3000)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(max_size=16)
    | st.dates()
    | st.times()
    | st.datetimes(timezones=st.sampled_from([None, dt.UTC, PARIS]))
    | st.timedeltas()
    | st.decimals(allow_nan=False)
    | st.uuids()
    | st.sampled_from([Color.RED, Color.GREEN, Level.LOW, Level.HIGH])
)
_leaves = _hashable_leaves | st.floats() | st.binary(max_size=16).map(bytearray)
_hashables = st.recursive(
    _hashable_leaves,
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)
_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text() | st.just("$durable"), inner, max_size=4)
        | st.dictionaries(_hashables, inner, max_size=4)
        | st.sets(_hashables, max_size=4)
        | st.frozensets(_hashables, max_size=4)
        | st.builds(Inner, st.text(), st.frozensets(st.text(), max_size=3))
        | st.builds(Frozen, st.integers(), st.lists(st.integers(), max_size=3).map(tuple))
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, database=None)
@given(_values)
def test_property_round_trip_of_taggable_values(value: Any) -> None:
    """Any nesting of the taggable types round-trips exactly as plain JSON (header j)."""
    payload = dumps(value, allow_pickle=False, where="v")
    assert payload[:1] == b"j"
    assert_same(value, loads(payload, allow_pickle=False))


# -- the pickle boundary -----------------------------------------------------------------


def test_pickle_sentinel_works_when_loading_is_allowed(tmp_path: Path) -> None:
    """Control: the sentinel pickle does create its file when a P payload may be loaded."""
    sentinel = tmp_path / "unpickled"
    payload = b"P" + json.dumps(pickle_tag(Touch(sentinel))).encode()
    loads(payload, allow_pickle=True)
    assert sentinel.exists()


def test_plain_json_payload_with_a_pickle_tag_is_refused_unloaded(tmp_path: Path) -> None:
    """A j payload holding a pickle tag raises PayloadError and the pickle never runs."""
    sentinel = tmp_path / "unpickled"
    payload = b"j" + json.dumps({"a": [pickle_tag(Touch(sentinel))]}).encode()
    error = catch(lambda: loads(payload, allow_pickle=True, run_id="run-1", position=4))
    assert type(error) is PickleRefused and error.reason == "smuggled"
    assert "run-1" in str(error)
    assert "position 4" in str(error)
    assert (error.run_id, error.position) == ("run-1", 4)
    assert not sentinel.exists()


def test_pickled_payload_is_refused_when_pickling_is_disabled(tmp_path: Path) -> None:
    """A P payload read with allow_pickle=False raises PayloadError without unpickling."""
    sentinel = tmp_path / "unpickled"
    payload = b"P" + json.dumps(pickle_tag(Touch(sentinel))).encode()
    error = catch(lambda: loads(payload, allow_pickle=False, run_id="run-2"))
    assert type(error) is PickleRefused and error.reason == "pickling disabled"
    assert "run-2" in str(error)
    assert "allow_pickle" in str(error)
    assert not sentinel.exists()


def test_plain_object_round_trips_through_pickle_when_allowed() -> None:
    """An object only pickle can store round-trips with allow_pickle and marks the payload P."""
    payload = dumps({"points": [Point(1, 2)]}, allow_pickle=True, where="v")
    assert payload[:1] == b"P"
    # Only the sub-value is pickled: the rest stays readable JSON.
    assert json.loads(payload[1:])["points"][0]["$durable"] == "pickle"
    assert loads(payload, allow_pickle=True) == {"points": [Point(1, 2)]}


def test_lambda_round_trips_through_cloudpickle_when_allowed() -> None:
    """A lambda (pickled by value) round-trips and still computes the same thing."""
    offset = 10
    payload = dumps(lambda n: n + offset, allow_pickle=True, where="v")
    assert payload[:1] == b"P"
    assert loads(payload, allow_pickle=True)(5) == 15


def test_locally_defined_dataclass_is_pickled_not_tagged() -> None:
    """A dataclass defined in a function cannot be imported by name, so it is never tagged."""

    @dataclasses.dataclass
    class Local:
        x: int

    payload = dumps(Local(1), allow_pickle=True, where="v")
    assert payload[:1] == b"P"
    assert loads(payload, allow_pickle=True) == Local(1)
    error = catch(lambda: dumps([Local(1)], allow_pickle=False, where="the output"))
    assert type(error) is SerializationError
    assert "cannot be imported" in str(error)
    assert "[0]" in str(error)


def test_refused_pickle_names_where_type_and_path() -> None:
    """Without allow_pickle, SerializationError names the where text, the type and the path."""
    value = {"outer": [1, {"inner": Point(0, 0)}]}
    error = catch(lambda: dumps(value, allow_pickle=False, where="argument 'p' of task 't'"))
    assert type(error) is SerializationError
    assert isinstance(error, TypeError)
    message = str(error)
    assert "argument 'p' of task 't'" in message
    assert f"{HERE}.Point" in message
    assert "['outer'][1]['inner']" in message
    assert error.type_name == f"{HERE}.Point"
    assert error.where == "argument 'p' of task 't'"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (Point(0, 0), None),
        ((1, Point(0, 0)), "[1]"),
        ({1: Point(0, 0)}, "[1]"),
        ({Point(0, 0): 1}, "[key "),
        ({Point(0, 0)}, "{…}"),
        (Frozen(1, (2, Point(0, 0))), ".y[1]"),
    ],
    ids=["top", "tuple", "non-str-key-dict", "dict-key", "set", "dataclass-field"],
)
def test_error_path_follows_containers(value: Any, path: str | None) -> None:
    """The path in the message leads through tuples, dict keys, sets and dataclass fields."""
    error = catch(lambda: dumps(value, allow_pickle=False, where="w"))
    assert type(error) is SerializationError
    if path is None:
        assert "(at " not in str(error)
    else:
        assert f"(at {path}" in str(error)


@pytest.mark.parametrize(
    ("make", "type_name"),
    [
        (threading.Lock, "_thread.lock"),
        (lambda: (n for n in range(3)), "builtins.generator"),
    ],
    ids=["lock", "generator"],
)
def test_unpicklable_values_fail_even_with_pickling_allowed(
    make: Callable[[], Any], type_name: str
) -> None:
    """Values cloudpickle cannot store raise SerializationError naming their type."""
    error = catch(lambda: dumps({"x": make()}, allow_pickle=True, where="the output"))
    assert type(error) is SerializationError
    assert type_name in str(error)
    assert error.type_name == type_name
    assert "the output" in str(error)


def test_cyclic_value_raises_serialization_error() -> None:
    """A list that contains itself raises SerializationError, not RecursionError."""
    cycle: list[Any] = []
    cycle.append(cycle)
    error = catch(lambda: dumps(cycle, allow_pickle=False, where="w"))
    assert type(error) is SerializationError
    assert "contains itself" in str(error)


def test_failing_model_dump_raises_serialization_error() -> None:
    """User code that fails while encoding surfaces as SerializationError, chained."""
    error = catch(lambda: dumps(Exploding(x=1), allow_pickle=True, where="w"))
    assert type(error) is SerializationError
    assert "dump exploded" in str(error)
    assert isinstance(error.__cause__, RuntimeError)


def test_callable_where_is_called_only_on_failure() -> None:
    """A callable `where` is not called for storable values and is called once on failure."""
    calls: list[int] = []

    def where() -> str:
        calls.append(1)
        return "the lazily named value"

    for value in (1, "s", None, [1, {"a": (2,)}], Frozen(1, ())):
        dumps(value, allow_pickle=False, where=where)
    assert calls == []
    error = catch(lambda: dumps([threading.Lock()], allow_pickle=False, where=where))
    assert calls == [1]
    assert "the lazily named value" in str(error)
    assert error.where == "the lazily named value"


def test_string_where_is_used_verbatim() -> None:
    """A plain-string `where` appears in the message as given."""
    error = catch(lambda: dumps(threading.Lock(), allow_pickle=False, where="output of 'f'"))
    assert "Cannot store output of 'f':" in str(error)


# -- corrupt payloads --------------------------------------------------------------------

CORRUPT = {
    "empty": b"",
    "unknown-header": b"x{}",
    "lowercase-p-header": b"p[]",
    "truncated-json": b'j{"a": [1, 2',
    "header-only": b"j",
    "invalid-utf8": b'j"\xff\xfe"',
    "missing-module": b'j{"$durable":"dataclass","cls":"no_such_module_xyz:Thing","v":{}}',
    "missing-class": b'j{"$durable":"dataclass","cls":"' + HERE.encode() + b':Nope","v":{}}',
    "function-as-dataclass": b'j{"$durable":"dataclass","cls":"os:system","v":{}}',
    "function-as-enum": b'j{"$durable":"enum","cls":"os:system","v":"echo hi"}',
    "function-as-model": b'j{"$durable":"pydantic","cls":"os:system","v":{}}',
    "bad-model-json": b'j{"$durable":"pydantic","cls":"' + HERE.encode() + b':Host","json":{}}',
    "no-colon-ref": b'j{"$durable":"dataclass","cls":"os","v":{}}',
    "unknown-tag": b'j{"$durable":"nonsense","v":1}',
    "unhashable-tag": b'j{"$durable":[1],"v":1}',
    "finite-float-tag": b'j{"$durable":"float","v":"1.5"}',
    "bad-base64": b'j{"$durable":"bytes","v":"not base64!"}',
    "bad-timedelta": b'j{"$durable":"timedelta","v":"x"}',
    "bad-datetime": b'j{"$durable":"datetime","v":"yesterday"}',
    "bad-zone": b'j{"$durable":"datetime","v":"2024-01-01T00:00:00+00:00","tz":"No/Where"}',
    "bad-int": b'j{"$durable":"int","v":"0xZZ"}',
    "missing-value": b'j{"$durable":"tuple"}',
    "unhashable-set-item": b'j{"$durable":"set","v":[[1]]}',
    "bad-enum-value": b'j{"$durable":"enum","cls":"' + HERE.encode() + b':Color","v":"blue"}',
    "deep-nesting": b"j" + b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("data", CORRUPT.values(), ids=CORRUPT.keys())
def test_corrupt_payload_raises_payload_error_naming_the_row(data: bytes) -> None:
    """Every corrupt payload raises PayloadError (nothing else) naming run id and position."""
    error = catch(lambda: loads(data, allow_pickle=True, run_id="run-9", position=12))
    assert type(error) is PayloadError
    assert "run-9" in str(error)
    assert "12" in str(error)
    assert (error.run_id, error.position) == ("run-9", 12)


@pytest.mark.parametrize("data", CORRUPT.values(), ids=CORRUPT.keys())
def test_corrupt_payload_without_row_details_still_raises_payload_error(data: bytes) -> None:
    """Without a run id the error is still a PayloadError, about "the payload"."""
    error = catch(lambda: loads(data, allow_pickle=False))
    assert type(error) is PayloadError
    assert str(error).startswith("The payload")
    assert error.run_id is None


def test_run_without_position_is_named_as_the_runs_own_payload() -> None:
    """With a run id but no position the message names the run's own payload."""
    error = catch(lambda: loads(b"", allow_pickle=False, run_id="run-3"))
    assert "The payload of run 'run-3'" in str(error)


def test_pickled_payload_with_garbage_pickle_raises_payload_error() -> None:
    """A P payload whose pickle bytes are garbage raises PayloadError."""
    payload = b'P{"$durable":"pickle","v":"' + base64.b64encode(b"garbage") + b'"}'
    assert type(catch(lambda: loads(payload, allow_pickle=True))) is PayloadError


@pytest.mark.parametrize("tag", ["dataclass", "enum", "pydantic"])
def test_tag_naming_a_wrong_class_never_builds_it(tag: str) -> None:
    """A tag naming a class of the wrong kind fails without calling the class at all."""
    node = {"$durable": tag, "cls": f"{HERE}:Trap", "v": {}}
    error = catch(lambda: loads(b"j" + json.dumps(node).encode(), allow_pickle=True))
    assert type(error) is PayloadError
    assert TRAP_CALLS == []


def test_class_cached_for_one_tag_is_not_accepted_by_another() -> None:
    """A dataclass resolved (and cached) for its own tag is still refused by an enum tag."""
    assert type(roundtrip(Derived(1))) is Derived  # resolves and caches the class
    POST_INIT_CALLS.clear()
    node = {"$durable": "enum", "cls": f"{HERE}:Derived", "v": 7}
    error = catch(lambda: loads(b"j" + json.dumps(node).encode(), allow_pickle=False))
    assert type(error) is PayloadError
    assert POST_INIT_CALLS == []


# -- exceptions --------------------------------------------------------------------------


def error_roundtrip(error: BaseException, *, allow_pickle: bool = False) -> BaseException:
    data = dump_error(error, allow_pickle=allow_pickle)
    return load_error(data, allow_pickle=allow_pickle, run_id="run-e", position=1)


def raised(error: BaseException) -> BaseException:
    """*error* after being raised, so that it has a traceback."""
    try:
        raise error
    except BaseException as caught:
        return caught


def test_builtin_value_error_keeps_type_and_args() -> None:
    """A ValueError comes back as ValueError with the same args and message."""
    loaded = error_roundtrip(raised(ValueError("bad value", 3)))
    assert type(loaded) is ValueError
    assert loaded.args == ("bad value", 3)
    assert str(loaded) == str(ValueError("bad value", 3))


def test_key_error_keeps_its_repr_style_message() -> None:
    """A KeyError comes back as KeyError whose str is the quoted key."""
    loaded = error_roundtrip(KeyError("missing"))
    assert type(loaded) is KeyError
    assert loaded.args == ("missing",)
    assert str(loaded) == "'missing'"


def test_os_error_keeps_errno_strerror_and_filename() -> None:
    """An OSError keeps its subclass, errno, strerror and filename (kept outside args)."""
    original = OSError(errno.ENOENT, "No such file or directory", "/tmp/missing.txt")
    loaded = error_roundtrip(original)
    assert type(loaded) is FileNotFoundError
    assert isinstance(loaded, OSError)
    assert loaded.errno == errno.ENOENT
    assert loaded.strerror == "No such file or directory"
    assert loaded.filename == "/tmp/missing.txt"
    assert str(loaded) == str(original)


def test_syntax_error_keeps_its_location() -> None:
    """A SyntaxError keeps its file, line and offset."""
    original = catch(lambda: compile("x = (", "<cell>", "exec"))
    loaded = error_roundtrip(original)
    assert type(loaded) is SyntaxError
    assert isinstance(original, SyntaxError)
    assert isinstance(loaded, SyntaxError)
    assert (loaded.filename, loaded.lineno, loaded.offset) == (
        original.filename,
        original.lineno,
        original.offset,
    )


def test_custom_exception_with_custom_init_keeps_attributes() -> None:
    """A custom __init__(code, msg) is not called on load; args and .code come back."""
    loaded = error_roundtrip(raised(CodedError(404, "not found")))
    assert type(loaded) is CodedError
    assert loaded.args == ("not found",)
    assert loaded.code == 404
    assert str(loaded) == "not found"


def test_durable_error_keeps_structured_fields() -> None:
    """A NondeterminismError keeps run_id/position/... and still pickles with them."""
    original = NondeterminismError(
        "diverged", run_id="r1", position=4, recorded="task a (v1:00)", current="task b (v1:11)"
    )
    loaded = error_roundtrip(original)
    assert type(loaded) is NondeterminismError
    assert isinstance(loaded, NondeterminismError)
    assert (loaded.run_id, loaded.position) == ("r1", 4)
    assert (loaded.recorded, loaded.current) == ("task a (v1:00)", "task b (v1:11)")
    assert str(loaded) == "diverged"
    again = pickle.loads(pickle.dumps(loaded))
    assert (again.run_id, again.position, again.message) == ("r1", 4, "diverged")


def test_local_exception_class_becomes_recorded_error() -> None:
    """An exception class that cannot be imported loads as RecordedError with type and trace."""

    class LocalError(Exception):
        pass

    def fail_here() -> None:
        raise LocalError("local trouble")

    original = catch(fail_here)
    loaded = error_roundtrip(original)
    assert type(loaded) is RecordedError
    assert isinstance(loaded, RecordedError)
    assert loaded.type_name == f"{HERE}:{LocalError.__qualname__}"
    assert "local trouble" in str(loaded)
    assert "fail_here" in loaded.recorded_traceback
    assert loaded.recorded_traceback == "".join(traceback.format_exception(original))


def test_unencodable_attribute_is_dropped_not_fatal() -> None:
    """An attribute that cannot be stored is dropped; the error and other attributes record."""
    original = CodedError(1, "boom")
    original.lock = threading.Lock()
    for allow_pickle in (False, True):
        loaded = error_roundtrip(original, allow_pickle=allow_pickle)
        assert type(loaded) is CodedError
        assert loaded.code == 1
        assert not hasattr(loaded, "lock")


def test_dropped_attribute_does_not_mark_the_record_pickled() -> None:
    """An attribute dropped half-way (a pickled part, then a failure) leaves no P header."""
    original = CodedError(2, "mixed")
    original.mixed = [Point(1, 2), threading.Lock()]
    data = dump_error(original, allow_pickle=True)
    assert data[:1] == b"j"
    loaded = load_error(data, allow_pickle=False)
    assert type(loaded) is CodedError
    assert not hasattr(loaded, "mixed")


def test_picklable_attribute_is_kept_with_pickling_allowed() -> None:
    """With allow_pickle an attribute only pickle can store is kept (and the record is P)."""
    original = CodedError(3, "with point")
    original.point = Point(5, 6)
    data = dump_error(original, allow_pickle=True)
    assert data[:1] == b"P"
    assert load_error(data, allow_pickle=True).point == Point(5, 6)
    assert type(catch(lambda: load_error(data, allow_pickle=False))) is PickleRefused


def test_unencodable_args_fall_back_to_the_message() -> None:
    """When args cannot be stored the error still loads, with the message as its args."""
    original = ValueError(threading.Lock())
    loaded = error_roundtrip(original)
    assert type(loaded) is ValueError
    assert loaded.args == (str(original),)


def test_cyclic_args_still_record() -> None:
    """An exception whose args contain themselves still records instead of raising."""
    cycle: list[Any] = []
    cycle.append(cycle)
    loaded = error_roundtrip(ValueError(cycle))
    assert type(loaded) is ValueError
    assert loaded.args == ("[[...]]",)


def test_exception_whose_str_raises_still_records() -> None:
    """An exception whose __str__ raises records with a placeholder message."""
    data = dump_error(raised(BadStrError("x")), allow_pickle=False)
    record = json.loads(data[1:])
    assert "str() failed" in record["message"]
    loaded = load_error(data, allow_pickle=False)
    assert type(loaded) is BadStrError
    assert loaded.args == ("x",)


def test_exception_message_with_lone_surrogate_records() -> None:
    """A message holding a lone surrogate (from os.fsdecode) records and loads back."""
    original = FileNotFoundError(errno.ENOENT, "No such file", "caf\udce9.txt")
    loaded = error_roundtrip(original)
    assert type(loaded) is FileNotFoundError
    assert loaded.filename == "caf\udce9.txt"


def test_exception_group_round_trips_with_pickling_allowed() -> None:
    """An ExceptionGroup (whose __new__ needs its args) comes back with its sub-errors."""
    original = ExceptionGroup("several", [ValueError("a"), KeyError("b")])
    loaded = error_roundtrip(original, allow_pickle=True)
    assert type(loaded) is ExceptionGroup
    assert isinstance(loaded, ExceptionGroup)
    assert loaded.message == "several"
    assert [type(e) for e in loaded.exceptions] == [ValueError, KeyError]


def test_exception_group_round_trips_without_pickling() -> None:
    """Pickles are off by default, so the exceptions a group holds are stored by class
    name like any exception: nested groups, custom attributes, and code that runs
    ``except*`` on the loaded group sees the same sub-errors."""
    inner = ExceptionGroup("inner", [CodedError(7, "seven")])
    loaded = error_roundtrip(raised(ExceptionGroup("outer", [ValueError("a"), inner])))
    assert type(loaded) is ExceptionGroup and str(loaded) == "outer (2 sub-exceptions)"
    first, nested = loaded.exceptions
    assert type(first) is ValueError and first.args == ("a",)
    assert type(nested) is ExceptionGroup
    (coded,) = nested.exceptions
    assert type(coded) is CodedError and (coded.args, coded.code) == (("seven",), 7)
    caught: list[str] = []
    try:
        raise loaded
    except* CodedError as group:
        caught.append(repr(group.exceptions))
    except* ValueError as group:
        caught.append(repr(group.exceptions))
    assert caught == [
        "(ExceptionGroup('inner', [CodedError('seven')]),)",
        "(ValueError('a'),)",
    ]


def test_exceptions_as_values_round_trip_without_pickling() -> None:
    """An exception returned or passed as a value keeps its class, args and attributes;
    an attribute that cannot be stored is dropped, not the exception."""
    original = CodedError(404, "not found")
    original.note = {"when": dt.date(2025, 1, 2)}
    original.socket = threading.Lock()  # not storable without a pickle: dropped
    loaded = roundtrip({"errors": [original, KeyError("k")]})["errors"]
    assert type(loaded[0]) is CodedError
    assert (loaded[0].args, loaded[0].code) == (("not found",), 404)
    assert loaded[0].note == {"when": dt.date(2025, 1, 2)}
    assert not hasattr(loaded[0], "socket")
    assert type(loaded[1]) is KeyError and loaded[1].args == ("k",)


def test_a_local_exception_in_a_group_needs_a_pickle() -> None:
    """A sub-error whose class cannot be imported by name cannot be stored as JSON, so
    without pickles the group is recorded as a RecordedError (with its traceback)."""

    class Local(Exception):
        pass

    loaded = error_roundtrip(ExceptionGroup("several", [Local("x")]))
    assert type(loaded) is RecordedError
    assert loaded.type_name == "builtins:ExceptionGroup"
    assert "Local: x" in loaded.recorded_traceback


def test_an_exception_tag_naming_another_class_builds_nothing() -> None:
    """The exception tag builds only exception classes: a Trap or os.system is refused
    before anything is called."""
    TRAP_CALLS.clear()
    for ref in (f"{HERE}:Trap", "os:system"):
        node = {"$durable": "exception", "cls": ref, "args": []}
        with pytest.raises(PayloadError):
            loads(b"j" + json.dumps(node).encode(), allow_pickle=False)
    assert TRAP_CALLS == []


def test_error_record_naming_a_non_exception_class_is_a_recorded_error() -> None:
    """A record whose type is not an exception class (even a cached one) is not built."""
    roundtrip(Derived(2))  # caches tests...:Derived as a dataclass
    POST_INIT_CALLS.clear()
    for type_ref in (f"{HERE}:Derived", f"{HERE}:Trap", "os:system"):
        data = b"j" + json.dumps({"type": type_ref, "message": "m", "args": ["m"]}).encode()
        loaded = load_error(data, allow_pickle=False)
        assert type(loaded) is RecordedError
        assert loaded.type_name == type_ref
    assert POST_INIT_CALLS == []
    assert TRAP_CALLS == []


@pytest.mark.parametrize(
    "data",
    [b"", b"j[1, 2", b"j5", b'j{"message": "no type"}', dumps([1], allow_pickle=False, where="")],
    ids=["empty", "truncated", "scalar", "no-type", "list"],
)
def test_load_error_of_a_non_error_raises_payload_error(data: bytes) -> None:
    """load_error of something that is not a recorded error raises PayloadError."""
    error = catch(lambda: load_error(data, allow_pickle=False, run_id="run-x", position=2))
    assert type(error) is PayloadError
    assert "run-x" in str(error)


def test_error_attribute_named_like_the_tag_is_dropped() -> None:
    """An attribute called "$durable" would read as a type tag, so it is not recorded."""
    original = CodedError(5, "tagged")
    setattr(original, "$durable", "pickle")
    loaded = error_roundtrip(original)
    assert type(loaded) is CodedError
    assert loaded.code == 5


def test_cloudpickle_is_what_stores_pickled_values() -> None:
    """The pickle tag holds cloudpickle bytes (loadable by cloudpickle directly)."""
    payload = dumps(Point(7, 8), allow_pickle=True, where="v")
    raw = base64.b64decode(json.loads(payload[1:])["v"])
    assert cloudpickle.loads(raw) == Point(7, 8)


def test_serde_module_header_constants() -> None:
    """The two headers are the documented single bytes."""
    assert (_serde.JSON, _serde.PICKLED, _serde.TAG) == (b"j", b"P", "$durable")
