"""JSON trees back to values: the inverse of `encoding.py`.

Classes named in tags are found among the modules already imported (never imported for
a payload, see `classes.py`) and must be what the tag says (a dataclass, an Enum, a
pydantic model, an exception class) before anything is constructed from them; a pickle
is loaded only if the payload's header allows it (see `serde.loads`). `viewing.py`
decodes for display, looking no class up.
"""

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
from collections.abc import Callable
from typing import Any

from .classes import resolve_class, unpickle
from .encoding import TAG


class RefusedPickle(Exception):
    """A pickle tag inside a ``j`` payload; `loads` turns it into a PayloadError."""


class Decoder:
    """Decodes one tree; *may_unpickle* says whether pickle tags may be loaded."""

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
            raise RefusedPickle
        return unpickle(base64.b64decode(node["v"]))


def _is_dataclass_type(cls: type) -> bool:
    return dataclasses.is_dataclass(cls)


def _is_pydantic_type(cls: type) -> bool:
    return hasattr(cls, "model_validate") and hasattr(cls, "model_fields")


def _decode_dataclass(dec: Decoder, node: dict[str, Any]) -> Any:
    cls = resolve_class(node["cls"], _is_dataclass_type, "a dataclass")
    # Build without calling __init__/__post_init__: the stored state is the state.
    obj: Any = object.__new__(cls)
    for name, value in node["v"].items():
        object.__setattr__(obj, name, dec.decode(value))
    return obj


def _decode_pydantic(dec: Decoder, node: dict[str, Any]) -> Any:
    cls: Any = resolve_class(node["cls"], _is_pydantic_type, "a pydantic model")
    if "json" in node:  # written in the model's JSON mode
        return cls.model_validate_json(json.dumps(node["json"]))
    return cls.model_validate(dec.decode(node["v"]))  # its Python mode, durable's tags


def _decode_exception(dec: Decoder, node: dict[str, Any]) -> BaseException:
    cls = resolve_class(node["cls"], lambda c: issubclass(c, BaseException), "an exception class")
    error = new_error(cls, tuple(dec.decode(node["args"])))
    for name, value in dec.decode(node.get("state", {})).items():
        try:
            setattr(error, name, value)
        except Exception:  # read-only (an ExceptionGroup's exceptions) or refused
            continue
    return error


def new_error(cls: type[BaseException], args: tuple[Any, ...]) -> BaseException:
    """An instance of *cls* holding *args*, made without calling ``__init__``.

    ``__new__`` only: given the args it builds what needs them (an ExceptionGroup
    refuses to exist without them); anything it cannot build that way is built bare.
    """
    try:
        error = cls.__new__(cls, *args)
    except Exception:
        error = cls.__new__(cls)
    if type(error) is not cls:  # a __new__ that picked another class (OSError does)
        error = cls.__new__(cls)
    error.args = args
    return error


def _decode_clock(cls: type[dt.datetime] | type[dt.time], node: dict[str, Any]) -> Any:
    value = cls.fromisoformat(node["v"])
    if "tz" in node:  # the same wall time, in its zone again
        value = value.replace(tzinfo=zoneinfo.ZoneInfo(node["tz"]))
    if node.get("fold") == 1:
        value = value.replace(fold=1)
    return value


def _decode_float(_dec: Decoder, node: dict[str, Any]) -> float:
    value = float(node["v"])
    if math.isfinite(value):
        raise ValueError("a float tag must hold nan or ±inf")
    return value


_DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {
    "float": _decode_float,
    "int": lambda _d, n: int(n["v"], 16),
    "dict": lambda d, n: {d.decode(k): d.decode(v) for k, v in n["v"]},
    "tuple": lambda d, n: tuple(d.decode(v) for v in n["v"]),
    "set": lambda d, n: {d.decode(v) for v in n["v"]},
    "frozenset": lambda d, n: frozenset(d.decode(v) for v in n["v"]),
    "bytes": lambda _d, n: base64.b64decode(n["v"], validate=True),
    "bytearray": lambda _d, n: bytearray(base64.b64decode(n["v"], validate=True)),
    "datetime": lambda _d, n: _decode_clock(dt.datetime, n),
    "date": lambda _d, n: dt.date.fromisoformat(n["v"]),
    "time": lambda _d, n: _decode_clock(dt.time, n),
    "timedelta": lambda _d, n: dt.timedelta(*n["v"]),
    "Decimal": lambda _d, n: decimal.Decimal(n["v"]),
    "UUID": lambda _d, n: uuid.UUID(n["v"]),
    "enum": lambda d, n: resolve_class(n["cls"], lambda c: issubclass(c, enum.Enum), "an Enum")(
        d.decode(n["v"])
    ),
    "dataclass": _decode_dataclass,
    "pydantic": _decode_pydantic,
    "exception": _decode_exception,
    "pickle": lambda d, n: d.unpickle(n),
}
