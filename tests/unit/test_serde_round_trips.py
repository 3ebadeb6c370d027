"""Payload encoding (`durable.core.serde`): exact round-trips of every supported type,
and the plain JSON a payload is."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import uuid
import zoneinfo
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable.core import serde as _serde
from durable.core.encoding import Encoder
from durable.core.serde import dumps, loads
from tests.unit._serde_helpers import Color, Frozen, roundtrip

PARIS = zoneinfo.ZoneInfo("Europe/Paris")


# -- module-level types (importable by name, as tags require) -------------------------


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


@dataclasses.dataclass(slots=True)
class Slotted:
    a: int
    b: str = "b"


# -- helpers ---------------------------------------------------------------------------


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


def test_serde_module_header_constants() -> None:
    """The two headers are the documented single bytes."""
    assert (_serde.JSON, _serde.PICKLED, _serde.TAG) == (b"j", b"P", "$durable")
