"""How a call becomes a stable identity: a versioned hash of a canonical form.

The hash must be the same in every process, under every PYTHONHASHSEED and after
restarts, or healthy runs would look modified when another process replays them.
So it never hashes pickle bytes (a set of strings pickles in hash-seed order). It
walks the value instead: dict items and set elements are sorted by their own
canonical encoding, scalars are written in a fixed textual form, dataclasses and
plain objects by class name and fields. Objects it cannot see into (no fields, no
known type) contribute their class name only: a weak identity, documented in
docs/concepts/replay.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

#: Bumped whenever the canonical form changes, so old hashes are never compared with new.
HASH_VERSION = "v1"

_MAX_DEPTH = 64


def call_hash(kind: str, name: str, arguments: Mapping[str, Any]) -> str:
    """Return the versioned hash of a call: its kind, name and bound arguments."""
    out: list[str] = [kind, "\x00", name, "\x00"]
    _dict(arguments, out, 0)
    digest = hashlib.blake2b("".join(out).encode("utf-8", "surrogatepass"), digest_size=16)
    return f"{HASH_VERSION}:{digest.hexdigest()}"


def canonical(value: Any) -> str:
    """Return the canonical text of one value (exposed for tests and debugging)."""
    out: list[str] = []
    _encode(value, out, 0)
    return "".join(out)


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _encode(value: Any, out: list[str], depth: int) -> None:
    # Exact type checks first: they are the common case and the cheapest.
    t = type(value)
    if value is None:
        out.append("N")
    elif t is bool:
        out.append("T" if value else "F")
    elif t is int:
        out.append(f"i{value};")
    elif t is str:
        out.append(f"s{len(value)}:{value}")
    elif t is float:
        out.append(f"f{value!r};")
    elif depth > _MAX_DEPTH:
        out.append(f"w{_qualname(t)};")
    elif t is list or t is tuple:
        out.append(f"{'l' if t is list else 't'}{len(value)}[")
        for item in value:
            _encode(item, out, depth + 1)
        out.append("]")
    elif t is dict:
        _dict(value, out, depth)
    elif t is set or t is frozenset:
        out.append(f"S{len(value)}{{")
        out.extend(sorted(_canonical_at(item, depth + 1) for item in value))
        out.append("}")
    else:
        _encode_other(value, t, out, depth)


def _canonical_at(value: Any, depth: int) -> str:
    out: list[str] = []
    _encode(value, out, depth)
    return "".join(out)


def _dict(value: Mapping[Any, Any], out: list[str], depth: int) -> None:
    out.append(f"d{len(value)}{{")
    items = [
        _canonical_at(k, depth + 1) + "=" + _canonical_at(v, depth + 1) for k, v in value.items()
    ]
    items.sort()
    out.extend(items)
    out.append("}")


def _encode_other(value: Any, t: type, out: list[str], depth: int) -> None:
    name = _qualname(t)
    if isinstance(value, enum.Enum):
        out.append(f"e{name}:")
        _encode(value.value, out, depth + 1)
    elif isinstance(value, bool | int | str | float):
        # Subclasses of scalars (IntEnum handled above): keep the class, then the value.
        out.append(f"x{name}:")
        _encode(t.__mro__[-2](value), out, depth + 1)
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
        _encode(list(value), out, depth + 1)
    elif isinstance(value, dict):
        out.append(f"x{name}:")
        _dict(value, out, depth + 1)
    elif isinstance(value, set | frozenset):
        out.append(f"x{name}:")
        _encode(frozenset(value), out, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(f"c{name}:")
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        _dict(fields, out, depth + 1)
    elif callable(getattr(value, "model_dump", None)) and hasattr(t, "model_fields"):
        out.append(f"p{name}:")
        _encode(value.model_dump(), out, depth + 1)
    elif isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        durable_name = getattr(value, "durable_name", None)
        ident = durable_name if isinstance(durable_name, str) else _qualname(value)
        out.append(f"F{ident};")
    else:
        state = getattr(value, "__dict__", None)
        if isinstance(state, dict) and state:
            out.append(f"o{name}:")
            _dict(state, out, depth + 1)
        else:
            # Nothing stable to look at: the class alone is the identity (weak).
            out.append(f"w{name};")
