"""How a call becomes a stable identity: a versioned hash of a canonical form.

The hash must be the same in every process, under every PYTHONHASHSEED and after
restarts, or healthy runs would look modified when another process replays them.
So it never hashes pickle bytes (a set of strings pickles in hash-seed order). It
walks the value instead: dict items and set elements are sorted by their own
canonical encoding, scalars are written in a fixed textual form, dataclasses and
plain objects by class name and fields. Objects it cannot see into (no fields, no
known type) contribute their class name only: a weak identity, documented in
docs/concepts/replay.md. A value that contains itself is written as a back-reference
to the enclosing value, so linked structures (parent <-> child) stay linear to walk.

The whole value is walked, at every depth, without recursion: each container is a
generator that asks the loop in `_walk` for its parts (``yield (part, depth, out)``)
and is resumed once the part is written, so nesting is bounded by memory, not by the
interpreter's stack. (Until issue 23 the walk was recursive and wrote only the type
of a container nested more than 64 levels deep; for every value within that depth
the text is the same, byte for byte, so stored hashes still match.)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import itertools
import uuid
from collections.abc import Generator, Mapping
from typing import Any

from .names import stored_module

#: Bumped whenever the canonical form changes, so old hashes are never compared with new.
HASH_VERSION = "v1"

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
    flat = _flat(arguments)
    if flat is None:
        _walk(_dict(arguments, out, 0), {})
    else:
        out.append(flat)
    digest = hashlib.blake2b("".join(out).encode("utf-8", "surrogatepass"), digest_size=16)
    return f"{HASH_VERSION}:{digest.hexdigest()}"


def _flat(arguments: Mapping[str, Any]) -> str | None:
    """The text of arguments that are all scalars (most calls), or None."""
    items = []
    for key, value in arguments.items():
        k, v = _scalar(key), _scalar(value)
        if k is None or v is None:
            return None
        items.append(f"{k}={v}")
    items.sort()
    return f"d{len(items)}{{{''.join(items)}}}"


def canonical(value: Any) -> str:
    """Return the canonical text of one value (exposed for tests and debugging)."""
    out: list[str] = []
    _walk(_part(value, 0, out), {})
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


#: What a container's generator yields: a part to write, its depth, and where to.
_Part = tuple[Any, int, list[str]]
_Writer = Generator[_Part, None, None]


def _part(value: Any, depth: int, out: list[str]) -> _Writer:
    """A one-part writer: *value* at *depth* into *out* (the start of a walk)."""
    yield value, depth, out


def _walk(writer: _Writer, open_: _Open) -> None:
    """Run *writer* and every writer its parts need, innermost first, with a stack of
    generators instead of the call stack."""
    stack: list[tuple[_Writer, int | None]] = [(writer, None)]
    while stack:
        top, key = stack[-1]
        try:
            value, depth, out = next(top)
        except StopIteration:
            stack.pop()
            if key is not None:
                del open_[key]
            continue
        text = _scalar(value)
        if text is not None:
            out.append(text)
        elif id(value) in open_:
            # A cycle. Walking it again would never end (and cost 2**n steps on a
            # doubly linked structure); how many levels up it points is stable instead.
            out.append(f"r{depth - open_[id(value)]};")
        else:
            key = id(value)
            open_[key] = depth
            stack.append((_container(value, type(value), out, depth), key))


def _container(value: Any, t: type, out: list[str], depth: int) -> _Writer:
    if t is list or t is tuple:
        out.append(f"{'l' if t is list else 't'}{len(value)}[")
        for item in value:
            text = _scalar(item)  # the common case, without a round trip through _walk
            if text is None:
                yield item, depth + 1, out
            else:
                out.append(text)
        out.append("]")
    elif t is dict:
        yield from _dict(value, out, depth)
    elif t is set or t is frozenset:
        yield from _set(value, out, depth)
    else:
        yield from _other(value, t, out, depth)


def _dict(value: Mapping[Any, Any], out: list[str], depth: int) -> _Writer:
    """``d<n>{k=v...}``, items sorted by their text ``k=v``.

    When the keys' texts are distinct and none is a prefix of another (str and int
    keys always are), ``k=v`` texts sort as their keys do: the values are then
    written straight into *out*, in key order, and a deep value is never copied.
    Otherwise each item is written apart, and the texts sorted.
    """
    out.append(f"d{len(value)}{{")
    keyed: list[tuple[str, Any]] = []
    for k, v in value.items():
        text = _scalar(k)
        if text is None:
            buffer: list[str] = []
            yield k, depth + 1, buffer
            text = "".join(buffer)
        keyed.append((text, v))
    keyed.sort(key=_first)
    if all(not b[0].startswith(a[0]) for a, b in itertools.pairwise(keyed)):
        for text, v in keyed:
            scalar = _scalar(v)
            if scalar is None:
                out.append(text + "=")
                yield v, depth + 1, out
            else:
                out.append(f"{text}={scalar}")
    else:
        items = []
        for text, v in keyed:
            buffer = [text, "="]
            yield v, depth + 1, buffer
            items.append("".join(buffer))
        items.sort()
        out.extend(items)
    out.append("}")


def _first(pair: tuple[str, Any]) -> str:
    return pair[0]


def _set(value: Any, out: list[str], depth: int) -> _Writer:
    out.append(f"S{len(value)}{{")
    if len(value) == 1:  # nothing to sort: written in place, however deep
        yield next(iter(value)), depth + 1, out
    else:
        texts = []
        for item in value:
            buffer: list[str] = []
            yield item, depth + 1, buffer
            texts.append("".join(buffer))
        out.extend(sorted(texts))
    out.append("}")


def _other(value: Any, t: type, out: list[str], depth: int) -> _Writer:
    name = _qualname(t)
    if isinstance(value, enum.Enum):
        out.append(f"e{name}:")
        yield value.value, depth + 1, out
    elif isinstance(value, bool | int | str | float):
        # Subclasses of scalars (IntEnum handled above): keep the class, then the value
        # as its builtin base (not __mro__[-2], which is a mixin in class S(str, Mixin)).
        base = next(b for b in (int, float, str) if isinstance(value, b))
        out.append(f"x{name}:")
        yield base(value), depth + 1, out
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
        yield list(value), depth + 1, out
    elif isinstance(value, dict):
        out.append(f"x{name}:")
        yield from _dict(value, out, depth + 1)
    elif isinstance(value, set | frozenset):
        out.append(f"x{name}:")
        yield frozenset(value), depth + 1, out
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(f"c{name}:")
        # A field that was never assigned (init=False, no default) is simply absent.
        fields = {
            f.name: v
            for f in dataclasses.fields(value)
            if (v := getattr(value, f.name, _UNSET)) is not _UNSET
        }
        yield from _dict(fields, out, depth + 1)
    elif callable(getattr(value, "model_dump", None)) and hasattr(t, "model_fields"):
        out.append(f"p{name}:")
        yield value.model_dump(), depth + 1, out
    elif isinstance(value, type) or (callable(value) and hasattr(value, "__qualname__")):
        durable_name = getattr(value, "durable_name", None)
        ident = durable_name if isinstance(durable_name, str) else _qualname(value)
        out.append(f"F{ident};")
    else:
        state = getattr(value, "__dict__", None)
        if isinstance(state, dict) and state:
            out.append(f"o{name}:")
            yield from _dict(state, out, depth + 1)
        else:
            # Nothing stable to look at: the class alone is the identity (weak).
            out.append(f"w{name};")
