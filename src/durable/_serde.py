"""Payloads: the one place where values become stored bytes and back.

A payload is one header byte and a body:

* ``j`` + JSON: only JSON and durable's type tags (tuples, sets, bytes, datetimes,
  decimals, UUIDs, enums, dataclasses, pydantic models). Loading it never unpickles.
* ``P`` + JSON that may also hold cloudpickled sub-values, for what the tags cannot
  express. Loading one needs ``allow_pickle``.

Keeping pickles inside JSON leaves the rest of a value readable in the dashboard, and
the header makes a pickle impossible to smuggle into a row that claims plain JSON.
Classes named in tags are imported by name and must be what the tag says (a dataclass,
an Enum, a pydantic model, an exception) before anything is constructed.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as dt
import decimal
import enum
import importlib
import json
import math
import traceback
import uuid
from collections.abc import Callable
from typing import Any

import cloudpickle

from .errors import PayloadError, RecordedError, SerializationError

JSON = b"j"
PICKLED = b"P"
TAG = "$durable"

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_loads = json.JSONDecoder().decode


class _Unencodable(Exception):
    """Raised inside the encoder; carries the path to the value that failed."""

    def __init__(self, value: Any, reason: str) -> None:
        super().__init__(reason)
        self.value = value
        self.reason = reason
        self.path: list[str] = []


class _Encoder:
    __slots__ = ("allow_pickle", "pickled")

    def __init__(self, allow_pickle: bool) -> None:
        self.allow_pickle = allow_pickle
        self.pickled = False

    def encode(self, value: Any) -> Any:
        t = type(value)
        if t is str or t is int or t is bool or value is None:
            return value
        if t is float:
            if math.isfinite(value):
                return value
            return {TAG: "float", "v": repr(value)}
        try:
            if t is list:
                return [self.encode(v) for v in value]
            if t is dict:
                if all(type(k) is str for k in value) and TAG not in value:
                    return {k: self.encode(v) for k, v in value.items()}
                return {
                    TAG: "dict",
                    "v": [[self.encode(k), self.encode(v)] for k, v in value.items()],
                }
            if t is tuple:
                return {TAG: "tuple", "v": [self.encode(v) for v in value]}
        except _Unencodable as error:
            error.path.append("[…]")
            raise
        return self._encode_other(value, t)

    def _encode_other(self, value: Any, t: type) -> Any:
        if t is set or t is frozenset:
            return {TAG: t.__name__, "v": [self.encode(v) for v in value]}
        if t is bytes or t is bytearray:
            return {TAG: t.__name__, "v": base64.b64encode(value).decode("ascii")}
        if t is dt.datetime or t is dt.date or t is dt.time:
            return {TAG: t.__name__, "v": value.isoformat()}
        if t is dt.timedelta:
            return {TAG: "timedelta", "v": [value.days, value.seconds, value.microseconds]}
        if t is decimal.Decimal or t is uuid.UUID:
            return {TAG: t.__name__, "v": str(value)}
        if isinstance(value, enum.Enum):
            return {TAG: "enum", "cls": _class_ref(t), "v": self.encode(value.value)}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = {
                f.name: self.encode(getattr(value, f.name)) for f in dataclasses.fields(value)
            }
            return {TAG: "dataclass", "cls": _class_ref(t), "v": fields}
        if callable(getattr(value, "model_dump", None)) and hasattr(t, "model_fields"):
            return {TAG: "pydantic", "cls": _class_ref(t), "v": self.encode(value.model_dump())}
        return self._pickle(value)

    def _pickle(self, value: Any) -> Any:
        if not self.allow_pickle:
            raise _Unencodable(value, "it is not JSON data and pickling is disabled (allow_pickle)")
        try:
            data = cloudpickle.dumps(value)
        except Exception as error:
            raise _Unencodable(value, f"cloudpickle cannot serialize it ({error})") from None
        self.pickled = True
        return {TAG: "pickle", "v": base64.b64encode(data).decode("ascii")}


_SCALAR_ENCODERS: dict[type, Callable[[Any], str]] = {
    int: int.__repr__,
    str: json.encoder.encode_basestring,
    bool: lambda v: "true" if v else "false",
    type(None): lambda _v: "null",
}


def dumps(value: Any, *, allow_pickle: bool, where: str | Callable[[], str]) -> bytes:
    """Encode *value* as a payload.

    Args:
        value: what to store.
        allow_pickle: whether values JSON cannot express may be cloudpickled.
        where: names the value in an error, e.g. ``"argument 'n' of workflow 'app.f'"``,
            or a function that returns that text (only called when encoding fails).

    Raises:
        SerializationError: the value cannot be stored. Nothing has been written.
    """
    scalar = _SCALAR_ENCODERS.get(type(value))
    if scalar is not None:
        return JSON + scalar(value).encode("utf-8")
    encoder = _Encoder(allow_pickle)
    try:
        body = _dumps(encoder.encode(value))
    except _Unencodable as error:
        bad = type(error.value)
        path = "".join(reversed(error.path))
        inner = f" (at {path})" if path else ""
        where = where if isinstance(where, str) else where()
        raise SerializationError(
            f"Cannot store {where}{inner}: a value of type {bad.__module__}.{bad.__qualname__} "
            f"cannot be stored because {error.reason}. Pass plain data (JSON types, "
            "dataclasses, datetimes, ...) or enable pickling.",
            where=where,
            type_name=f"{bad.__module__}.{bad.__qualname__}",
        ) from None
    return (PICKLED if encoder.pickled else JSON) + body.encode("utf-8")


def loads(
    data: bytes, *, allow_pickle: bool, run_id: str | None = None, position: int | None = None
) -> Any:
    """Decode a payload made by `dumps`.

    Raises:
        PayloadError: the payload is corrupt, names a class that is not what it claims,
            or holds a pickle while pickling is disabled. Nothing is unpickled then.
    """
    where = _where(run_id, position)
    header = bytes(data[:1])
    if header == PICKLED and not allow_pickle:
        raise PayloadError(
            f"{where} holds a pickled value and pickling is disabled (allow_pickle=False); "
            "it was not loaded.",
            run_id=run_id,
            position=position,
        )
    if header not in (JSON, PICKLED):
        raise PayloadError(
            f"{where} is not a durable payload (unknown header {header!r}); the row is "
            "corrupt or was written by something else.",
            run_id=run_id,
            position=position,
        )
    try:
        tree = _loads(bytes(data[1:]).decode("utf-8"))
        return _Decoder(header == PICKLED).decode(tree)
    except PayloadError:
        raise
    except Exception as error:
        raise PayloadError(
            f"{where} cannot be decoded ({type(error).__name__}: {error}); the row is corrupt "
            "or names a type this code no longer has.",
            run_id=run_id,
            position=position,
        ) from error


def _where(run_id: str | None, position: int | None) -> str:
    if run_id is None:
        return "The payload"
    if position is None:
        return f"The payload of run {run_id!r}"
    return f"The payload at position {position} of run {run_id!r}"


class _Decoder:
    __slots__ = ("may_unpickle",)

    def __init__(self, may_unpickle: bool) -> None:
        self.may_unpickle = may_unpickle

    def decode(self, node: Any) -> Any:
        t = type(node)
        if t is list:
            return [self.decode(v) for v in node]
        if t is not dict:
            return node
        tag = node.get(TAG)
        if tag is None:
            return {k: self.decode(v) for k, v in node.items()}
        decode = _DECODERS.get(tag)
        if decode is None:
            raise ValueError(f"unknown type tag {tag!r}")
        return decode(self, node)

    def unpickle(self, node: dict[str, Any]) -> Any:
        if not self.may_unpickle:
            raise PayloadError("a plain-JSON payload contains a pickle tag; refusing to load it")
        return cloudpickle.loads(base64.b64decode(node["v"]))


def _class_ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


_CLASS_CACHE: dict[str, type] = {}


def resolve_class(ref: str, must_be: Callable[[type], bool], what: str) -> type:
    """Import ``module:qualname`` and check it is the kind of class the tag says."""
    cls = _CLASS_CACHE.get(ref)
    if cls is None:
        module_name, _, qualname = ref.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        if not isinstance(obj, type) or not must_be(obj):
            raise ValueError(f"{ref} is not {what}")
        cls = obj
        _CLASS_CACHE[ref] = cls
    return cls


def _is_dataclass_type(cls: type) -> bool:
    return dataclasses.is_dataclass(cls)


def _is_pydantic_type(cls: type) -> bool:
    return hasattr(cls, "model_validate") and hasattr(cls, "model_fields")


def _decode_dataclass(dec: _Decoder, node: dict[str, Any]) -> Any:
    cls = resolve_class(node["cls"], _is_dataclass_type, "a dataclass")
    # Build without calling __init__/__post_init__: the stored fields are the state.
    obj: Any = object.__new__(cls)
    for name, value in node["v"].items():
        object.__setattr__(obj, name, dec.decode(value))
    return obj


def _decode_float(_dec: _Decoder, node: dict[str, Any]) -> float:
    value = float(node["v"])
    if math.isfinite(value):
        raise ValueError("a float tag must hold nan or ±inf")
    return value


_DECODERS: dict[str, Callable[[_Decoder, dict[str, Any]], Any]] = {
    "float": _decode_float,
    "dict": lambda d, n: {d.decode(k): d.decode(v) for k, v in n["v"]},
    "tuple": lambda d, n: tuple(d.decode(v) for v in n["v"]),
    "set": lambda d, n: {d.decode(v) for v in n["v"]},
    "frozenset": lambda d, n: frozenset(d.decode(v) for v in n["v"]),
    "bytes": lambda _d, n: base64.b64decode(n["v"], validate=True),
    "bytearray": lambda _d, n: bytearray(base64.b64decode(n["v"], validate=True)),
    "datetime": lambda _d, n: dt.datetime.fromisoformat(n["v"]),
    "date": lambda _d, n: dt.date.fromisoformat(n["v"]),
    "time": lambda _d, n: dt.time.fromisoformat(n["v"]),
    "timedelta": lambda _d, n: dt.timedelta(*n["v"]),
    "Decimal": lambda _d, n: decimal.Decimal(n["v"]),
    "UUID": lambda _d, n: uuid.UUID(n["v"]),
    "enum": lambda d, n: resolve_class(n["cls"], lambda c: issubclass(c, enum.Enum), "an Enum")(
        d.decode(n["v"])
    ),
    "dataclass": _decode_dataclass,
    "pydantic": lambda d, n: resolve_class(  # type: ignore[attr-defined]
        n["cls"], _is_pydantic_type, "a pydantic model"
    ).model_validate(d.decode(n["v"])),
    "pickle": lambda d, n: d.unpickle(n),
}


# -- exceptions -----------------------------------------------------------------------


def dump_error(error: BaseException, *, allow_pickle: bool) -> bytes:
    """Encode an exception so that `load_error` rebuilds one of the same type.

    The class is stored by name with ``args`` and instance attributes; values that
    cannot be stored are dropped rather than failing, because the error must be
    recorded whatever it carries.
    """
    cls = type(error)
    record: dict[str, Any] = {
        "type": _class_ref(cls),
        "message": _safe_str(error),
        "traceback": "".join(traceback.format_exception(error)),
    }
    encoder = _Encoder(allow_pickle)
    with contextlib.suppress(_Unencodable):  # load_error falls back to (message,)
        record["args"] = encoder.encode(list(error.args))
    state: dict[str, Any] = {}
    for key, value in _error_state(error).items():
        try:
            state[key] = encoder.encode(value)
        except _Unencodable:
            continue  # one attribute that cannot be stored must not lose the error
    if state:
        record["state"] = state
    return (PICKLED if encoder.pickled else JSON) + _dumps(record).encode("utf-8")


def _error_state(error: BaseException) -> dict[str, Any]:
    state = dict(getattr(error, "__dict__", {}))
    state.pop("__notes__", None)
    return {k: v for k, v in state.items() if type(k) is str}


def _safe_str(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__}: str() failed>"


def load_error(
    data: bytes, *, allow_pickle: bool, run_id: str | None = None, position: int | None = None
) -> BaseException:
    """Rebuild the exception recorded by `dump_error`, of the same type when it imports.

    The instance is created without calling ``__init__`` (whose signature may not match
    ``args``) and gets its ``args`` and attributes back. A class that no longer imports
    becomes a `RecordedError` carrying the original type name and traceback.
    """
    record = loads(data, allow_pickle=allow_pickle, run_id=run_id, position=position)
    if not isinstance(record, dict) or "type" not in record:
        raise PayloadError(
            f"{_where(run_id, position)} is not a recorded error.", run_id=run_id, position=position
        )
    message = str(record.get("message", ""))
    recorded_tb = str(record.get("traceback", ""))
    try:
        cls = resolve_class(
            record["type"], lambda c: issubclass(c, BaseException), "an exception class"
        )
    except Exception:
        return RecordedError(
            f"{record['type']}: {message}",
            type_name=record["type"],
            recorded_traceback=recorded_tb,
        )
    exc_type: type[BaseException] = cls
    error = exc_type.__new__(exc_type)
    error.args = tuple(record.get("args", [message]))
    state = record.get("state")
    if isinstance(state, dict):
        for key, value in state.items():
            try:
                setattr(error, key, value)
            except (AttributeError, TypeError):
                continue
    return error
