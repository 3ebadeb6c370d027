"""The recursive canonical form as it was before issue 23 (cut at depth 64), kept
verbatim from src/durable/core/hashing.py at df08b50 as the reference: for every value
within that depth the iterative encoder must write the same bytes, so the hashes in
stored histories still match."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from durable.core.names import stored_module

#: Bumped whenever the canonical form changes, so old hashes are never compared with new.
HASH_VERSION = "v1"

_MAX_DEPTH = 64

#: Ints below 2**2048 have at most 617 digits, under the 640 that no
#: ``sys.set_int_max_str_digits`` setting can go below; wider ones are converted in
#: chunks of this many digits, so the text never depends on that setting.
_INT_FAST_BITS = 2048
_CHUNK_DIGITS = 500
_CHUNK = 10**_CHUNK_DIGITS

#: Ids of the values being encoded on the current path, mapped to their depth.
_Open = dict[int, int]

_UNSET: Any = object()


def call_hash(kind: str, name: str, arguments: Mapping[str, Any]) -> str:
    """Return the versioned hash of a call: its kind, name and bound arguments."""
    out: list[str] = [kind, "\x00", name, "\x00"]
    _dict(arguments, out, 0, {})
    digest = hashlib.blake2b("".join(out).encode("utf-8", "surrogatepass"), digest_size=16)
    return f"{HASH_VERSION}:{digest.hexdigest()}"


def canonical(value: Any) -> str:
    """Return the canonical text of one value (exposed for tests and debugging)."""
    out: list[str] = []
    _encode(value, out, 0, {})
    return "".join(out)


def _decimal(value: int) -> str:
    """The decimal text of any int, however wide (``str`` refuses past a limit)."""
    if value.bit_length() <= _INT_FAST_BITS:
        return str(value)
    rest, chunks = abs(value), []
    while rest:
        rest, low = divmod(rest, _CHUNK)
        chunks.append(low)
    head, *tail = reversed(chunks)
    sign = "-" if value < 0 else ""
    return sign + str(head) + "".join(f"{chunk:0{_CHUNK_DIGITS}d}" for chunk in tail)


def _qualname(cls: type) -> str:
    return f"{stored_module(cls.__module__)}.{cls.__qualname__}"


def _scalar(value: Any) -> str | None:
    """The canonical text of an exact str, int, None, bool or float; None otherwise."""
    t = type(value)
    if t is str:
        return f"s{len(value)}:{value}"
    if t is int:
        return f"i{_decimal(value)};"
    if value is None:
        return "N"
    if t is bool:
        return "T" if value else "F"
    if t is float:
        return f"f{value!r};"
    return None


def _encode(value: Any, out: list[str], depth: int, open_: _Open) -> None:
    # Scalars first: they are the common case and the cheapest.
    text = _scalar(value)
    if text is not None:
        out.append(text)
        return
    t = type(value)
    if depth > _MAX_DEPTH:
        out.append(f"w{_qualname(t)};")
    elif id(value) in open_:
        # A cycle. Walking it again until _MAX_DEPTH would cost 2**64 steps on a
        # doubly linked structure; how many levels up it points is stable instead.
        out.append(f"r{depth - open_[id(value)]};")
    else:
        open_[id(value)] = depth
        try:
            _encode_container(value, t, out, depth, open_)
        finally:
            del open_[id(value)]


def _encode_container(value: Any, t: type, out: list[str], depth: int, open_: _Open) -> None:
    if t is list or t is tuple:
        out.append(f"{'l' if t is list else 't'}{len(value)}[")
        for item in value:
            _encode(item, out, depth + 1, open_)
        out.append("]")
    elif t is dict:
        _dict(value, out, depth, open_)
    elif t is set or t is frozenset:
        out.append(f"S{len(value)}{{")
        out.extend(sorted(_canonical_at(item, depth + 1, open_) for item in value))
        out.append("}")
    else:
        _encode_other(value, t, out, depth, open_)


def _canonical_at(value: Any, depth: int, open_: _Open) -> str:
    text = _scalar(value)
    if text is not None:
        return text
    out: list[str] = []
    _encode(value, out, depth, open_)
    return "".join(out)


def _dict(value: Mapping[Any, Any], out: list[str], depth: int, open_: _Open) -> None:
    out.append(f"d{len(value)}{{")
    items = [
        _canonical_at(k, depth + 1, open_) + "=" + _canonical_at(v, depth + 1, open_)
        for k, v in value.items()
    ]
    items.sort()
    out.extend(items)
    out.append("}")


def _encode_other(value: Any, t: type, out: list[str], depth: int, open_: _Open) -> None:
    name = _qualname(t)
    if isinstance(value, enum.Enum):
        out.append(f"e{name}:")
        _encode(value.value, out, depth + 1, open_)
    elif isinstance(value, bool | int | str | float):
        # Subclasses of scalars (IntEnum handled above): keep the class, then the value
        # as its builtin base (not __mro__[-2], which is a mixin in class S(str, Mixin)).
        base = next(b for b in (int, float, str) if isinstance(value, b))
        out.append(f"x{name}:")
        _encode(base(value), out, depth + 1, open_)
    elif isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        out.append(f"b{len(data)}:{data.hex()};")
    elif isinstance(value, dt.datetime | dt.date | dt.time):
        out.append(f"D{name}:{value.isoformat()};")
    elif isinstance(value, dt.timedelta):
        out.append(f"Δ{value.days},{value.seconds},{value.microseconds};")
    elif isinstance(value, decimal.Decimal | uuid.UUID):
        out.append(f"m{name}:{value};")
    elif isinstance(value, list | tuple):
        out.append(f"x{name}:")
        _encode(list(value), out, depth + 1, open_)
    elif isinstance(value, dict):
        out.append(f"x{name}:")
        _dict(value, out, depth + 1, open_)
    elif isinstance(value, set | frozenset):
        out.append(f"x{name}:")
        _encode(frozenset(value), out, depth + 1, open_)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(f"c{name}:")
        # A field that was never assigned (init=False, no default) is simply absent.
        fields = {
            f.name: v
            for f in dataclasses.fields(value)
            if (v := getattr(value, f.name, _UNSET)) is not _UNSET
        }
        _dict(fields, out, depth + 1, open_)
    elif callable(getattr(value, "model_dump", None)) and hasattr(t, "model_fields"):
        out.append(f"p{name}:")
        _encode(value.model_dump(), out, depth + 1, open_)
    elif isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        durable_name = getattr(value, "durable_name", None)
        ident = durable_name if isinstance(durable_name, str) else _qualname(value)
        out.append(f"F{ident};")
    else:
        state = getattr(value, "__dict__", None)
        if isinstance(state, dict) and state:
            out.append(f"o{name}:")
            _dict(state, out, depth + 1, open_)
        else:
            # Nothing stable to look at: the class alone is the identity (weak).
            out.append(f"w{name};")
