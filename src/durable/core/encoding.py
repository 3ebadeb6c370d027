"""Values to JSON trees: durable's type tags, and pickles for what they cannot express.

`Encoder.encode` turns a value into JSON data (dicts, lists, strings, numbers), tagging
what JSON has no type for with ``{"$durable": <tag>, ...}``: tuples, sets, bytes,
datetimes, decimals, UUIDs, enums, dataclasses, pydantic models and exceptions (by
class name), and, when allowed, cloudpickled values. `decoding.py` is the way back.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import math
import uuid
import zoneinfo
from collections.abc import Iterable
from typing import Any

import cloudpickle

from .classes import class_ref, importable_ref

TAG = "$durable"

#: Ints up to this width have at most 617 decimal digits, below the 640 that no
#: ``sys.set_int_max_str_digits`` setting can go under. Wider ones are stored as hex,
#: which that limit never applies to, so every process can write and read them.
JSON_INT_BITS = 2048

_UNSET: Any = object()


def big_int(value: int) -> dict[str, Any]:
    return {TAG: "int", "v": hex(value)}


def short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__qualname__}>"
    return text if len(text) <= 40 else f"{text[:37]}..."


class Unencodable(Exception):
    """Raised by the encoder; carries the path to the value that failed."""

    def __init__(self, value: Any, reason: str) -> None:
        super().__init__(reason)
        self.value = value
        self.reason = reason
        self.path: list[str] = []


class Encoder:
    """Encodes one value; `pickled` tells afterwards whether it holds a pickle."""

    __slots__ = ("allow_pickle", "pickled")

    def __init__(self, allow_pickle: bool) -> None:
        self.allow_pickle = allow_pickle
        self.pickled = False

    def encode(self, value: Any) -> Any:
        t = type(value)
        if t is str or t is bool or value is None:
            return value
        if t is int:
            return value if value.bit_length() <= JSON_INT_BITS else big_int(value)
        if t is float:
            if math.isfinite(value):
                return value
            return {TAG: "float", "v": repr(value)}
        if t is list:
            return self._items(value)
        if t is dict:
            if all(type(k) is str for k in value) and TAG not in value:
                return self._str_dict(value)
            return {TAG: "dict", "v": self._pairs(value)}
        if t is tuple:
            return {TAG: "tuple", "v": self._items(value)}
        return self._encode_other(value, t)

    # The helpers below add one step to a failure's path, e.g. ``['a'][2].field``.

    def _items(self, values: Iterable[Any], *, indexed: bool = True) -> list[Any]:
        out: list[Any] = []
        try:
            for v in values:
                out.append(self.encode(v))
        except Unencodable as error:
            error.path.append(f"[{len(out)}]" if indexed else "{…}")
            raise
        return out

    def _str_dict(self, value: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        key = ""
        try:
            for key, v in value.items():
                out[key] = self.encode(v)
        except Unencodable as error:
            error.path.append(f"[{short_repr(key)}]")
            raise
        return out

    def _pairs(self, value: dict[Any, Any]) -> list[list[Any]]:
        out: list[list[Any]] = []
        for k, v in value.items():
            step = "[key {}]"  # the key's repr is only worth computing on failure
            try:
                key = self.encode(k)
                step = "[{}]"
                out.append([key, self.encode(v)])
            except Unencodable as error:
                error.path.append(step.format(short_repr(k)))
                raise
        return out

    def _at(self, value: Any, step: str) -> Any:
        try:
            return self.encode(value)
        except Unencodable as error:
            error.path.append(step)
            raise

    def _encode_other(self, value: Any, t: type) -> Any:
        if t is set or t is frozenset:
            return {TAG: t.__name__, "v": self._items(value, indexed=False)}
        if t is bytes or t is bytearray:
            return {TAG: t.__name__, "v": base64.b64encode(value).decode("ascii")}
        if t is dt.datetime or t is dt.time:
            return _encode_clock(value)
        if t is dt.date:
            return {TAG: "date", "v": value.isoformat()}
        if t is dt.timedelta:
            return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
        if t is decimal.Decimal or t is uuid.UUID:
            return {TAG: t.__name__, "v": str(value)}
        if isinstance(value, enum.Enum):
            ref = importable_ref(t)
            if ref is None:
                return self._pickle(value, _not_importable(t))
            return {TAG: "enum", "cls": ref, "v": self._at(value.value, ".value")}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            ref = importable_ref(t)
            if ref is None:
                return self._pickle(value, _not_importable(t))
            return {TAG: "dataclass", "cls": ref, "v": self._dataclass_state(value)}
        if callable(getattr(value, "model_dump", None)) and hasattr(t, "model_fields"):
            ref = importable_ref(t)
            if ref is None:
                return self._pickle(value, _not_importable(t))
            try:
                # The model's own JSON: every field pydantic can write (an IPv4Address),
                # read back by model_validate_json, as pydantic round-trips it.
                return {TAG: "pydantic", "cls": ref, "json": value.model_dump(mode="json")}
            except Exception:  # a field only Python mode can give: durable's own tags
                return {TAG: "pydantic", "cls": ref, "v": self.encode(value.model_dump())}
        if isinstance(value, BaseException):
            ref = importable_ref(t)
            if ref is None:
                return self._pickle(value, _not_importable(t))
            return {TAG: "exception", "cls": ref, **self._exception_state(value)}
        return self._pickle(value)

    def _exception_state(self, error: BaseException) -> dict[str, Any]:
        # An exception held as a value (one an ExceptionGroup groups, one a task
        # returns): its args must be stored; an attribute that cannot be is dropped, as
        # for a recorded error, because the error matters more than what it carries.
        node: dict[str, Any] = {"args": self._at(list(error.args), ".args")}
        state: dict[str, Any] = {}
        for name, v in instance_attributes(error).items():
            encoded = encode_or_drop(v, self.allow_pickle)
            if encoded is not None:
                state[name], pickled = encoded
                self.pickled = self.pickled or pickled
        if state:
            node["state"] = state
        return node

    def _dataclass_state(self, value: Any) -> dict[str, Any]:
        # Loading does not run __post_init__ again, so attributes it derived are state
        # as much as the fields are. A field never assigned (init=False, no default)
        # stays unassigned on load too.
        state = {
            f.name: v
            for f in dataclasses.fields(value)
            if (v := getattr(value, f.name, _UNSET)) is not _UNSET
        }
        for name, v in getattr(value, "__dict__", {}).items():
            if type(name) is str:
                state.setdefault(name, v)
        return {name: self._at(v, f".{name}") for name, v in state.items()}

    def _pickle(self, value: Any, why: str = "it is not JSON data") -> Any:
        if not self.allow_pickle:
            raise Unencodable(value, f"{why} and pickling is disabled (allow_pickle)")
        try:
            data = cloudpickle.dumps(value)
        except Exception as error:
            raise Unencodable(value, f"cloudpickle cannot serialize it ({error})") from None
        self.pickled = True
        return {TAG: "pickle", "v": base64.b64encode(data).decode("ascii")}


def encode_or_drop(value: Any, allow_pickle: bool) -> tuple[Any, bool] | None:
    """The encoded tree and whether it holds a pickle, or None when it cannot be stored.

    Any failure counts (not only unencodable values): a property that raises or a
    cycle must not stop an error from being recorded.
    """
    encoder = Encoder(allow_pickle)
    try:
        return encoder.encode(value), encoder.pickled
    except Exception:
        return None


def instance_attributes(error: BaseException) -> dict[str, Any]:
    """An exception's own attributes worth storing (not its notes)."""
    state = dict(getattr(error, "__dict__", {}))
    state.pop("__notes__", None)
    # Stored as one plain dict, where a "$durable" key would read as a tag.
    return {k: v for k, v in state.items() if type(k) is str and k != TAG}


def _encode_clock(value: dt.datetime | dt.time) -> dict[str, Any]:
    node: dict[str, Any] = {TAG: type(value).__name__, "v": value.isoformat()}
    # The ISO text has neither the zone (only its offset) nor fold. Replay must see
    # what the first run saw: the zone decides later arithmetic across DST, and fold
    # which of a repeated hour's two instants is meant.
    if isinstance(value.tzinfo, zoneinfo.ZoneInfo) and value.tzinfo.key:
        node["tz"] = value.tzinfo.key
    if value.fold:
        node["fold"] = 1
    return node


def _not_importable(cls: type) -> str:
    return f"its class cannot be imported as {class_ref(cls)} (is it defined in a function?)"
