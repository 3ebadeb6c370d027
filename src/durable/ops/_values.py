"""Payloads and records as plain JSON values, for people to read.

Nothing here runs user code or imports anything: payloads are decoded in view mode
(`durable.core.viewing`), which never unpickles (a pickled value shows as what it is, not
as its contents) and never looks a class up (a dataclass shows as its stored fields, an
enum as ``Colour('red')``). Showing a value never fails: what cannot be read shows as
``{"unreadable": reason}``. A value too long to show whole is cut and marked.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping
from typing import Any

from durable.core.serde import JSON, loads
from durable.core.viewing import DEPTH, unreadable
from durable.errors import DurableError

#: Values whose JSON is longer than this are cut to this many characters.
PREVIEW = 2000


#: The first and last moments ISO 8601 dates (years 1 to 9999) can name.
_FIRST = dt.datetime.min.replace(tzinfo=dt.UTC)
_LAST = dt.datetime.max.replace(tzinfo=dt.UTC)


def iso(moment: float | None) -> str | None:
    """Seconds since the epoch as ISO 8601 UTC with a Z (None stays None).

    Never raises, whatever is stored: a time past year 9999 (a deadline written before
    deadlines had a horizon, infinity) shows as the last moment of year 9999, one
    before year 1 as the first moment of year 1, so the text stays a valid date-time
    for API clients; NaN, or something that is no number, shows as None.
    """
    if moment is None:
        return None
    stored: Any = moment  # a row may hold anything
    try:
        when = dt.datetime.fromtimestamp(stored, dt.UTC)
    except (OverflowError, ValueError, OSError, TypeError):
        if not isinstance(stored, int | float) or math.isnan(stored):
            return None
        when = _LAST if stored > 0 else _FIRST
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


def duration(start: float | None, end: float | None) -> float | None:
    """Seconds from *start* to *end*, if both are known."""
    return None if start is None or end is None else round(max(0.0, end - start), 6)


def value(data: bytes | None) -> Any:
    """A stored payload as a JSON value (see the module docstring); None stays None."""
    if data is None:
        return None
    try:
        return _cut(plain(loads(data, allow_pickle=False, view=True)))
    except DurableError as error:
        if bytes(data[:1]) != JSON:
            return unreadable(f"a pickled value, not unpickled for display ({error})")
        return unreadable(f"the payload is corrupt: {error}")
    except Exception as error:  # a view must never fail; say what happened instead
        return unreadable(f"it cannot be shown ({type(error).__name__})")


def state(data: bytes | None) -> dict[str, Any] | None:
    """A stored properties snapshot (`durable.core.properties`) as a JSON object, each
    property's value cut like any other (`PREVIEW`); None stays None. Read as the plain
    JSON it is (no type tags), never failing: what cannot be read shows as
    ``{"unreadable": reason}``, and so does nesting deeper than `DEPTH`."""
    if data is None:
        return None
    raw = bytes(data)
    try:
        parsed = json.loads(raw[1:] if raw[:1] == b"j" else raw)
    except RecursionError:
        return unreadable("the snapshot is nested too deeply to read")
    except ValueError as failure:  # not JSON, not UTF-8, an integer too long
        return unreadable(f"the snapshot is corrupt: {failure}")
    if not isinstance(parsed, dict):
        return unreadable(f"the snapshot is not a JSON object but {type(parsed).__name__}")
    try:
        return {_text(str(key)): _cut(_shallow(inner, 1)) for key, inner in parsed.items()}
    except Exception as failure:  # a view must never fail; say what happened instead
        return unreadable(f"the snapshot cannot be shown ({type(failure).__name__})")


def _shallow(item: Any, depth: int) -> Any:
    """Parsed JSON as `plain` shows it, cut off `DEPTH` levels down."""
    if not isinstance(item, dict | list):
        return plain(item)
    if depth >= DEPTH:
        return unreadable(f"nested deeper than {DEPTH} levels; not shown")
    if isinstance(item, list):
        return [_shallow(inner, depth + 1) for inner in item]
    return {_text(str(key)): _shallow(inner, depth + 1) for key, inner in item.items()}


def plain(item: Any) -> Any:
    """A viewed value (see `viewing`) as JSON data: containers kept, the rest as text.

    Only what every JSON parser reads and UTF-8 can hold: NaN and infinities become
    text, and so does text with lone surrogates (escaped as ``\\udc80``)."""
    if item is None or isinstance(item, bool | int):
        return item
    if isinstance(item, str):
        return _text(item)
    if isinstance(item, float):
        return item if math.isfinite(item) else repr(item)
    if isinstance(item, Mapping):
        return {_text(str(key)): plain(inner) for key, inner in item.items()}
    if isinstance(item, list | tuple):
        return [plain(inner) for inner in item]
    if isinstance(item, set | frozenset):
        return sorted((plain(inner) for inner in item), key=repr)
    if isinstance(item, dt.datetime | dt.date | dt.time):
        return item.isoformat()
    return _text(repr(item))


def _text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _cut(item: Any) -> Any:
    text = json.dumps(item, ensure_ascii=False, default=repr)
    if len(text) <= PREVIEW:
        return item
    return {"truncated": text[:PREVIEW]}


def error(data: bytes | None) -> dict[str, Any] | None:
    """A recorded exception as {"type", "message", "traceback"}, without rebuilding it."""
    if data is None:
        return None
    try:
        record = loads(data, allow_pickle=False, view=True)
    except DurableError as failure:
        return {"type": "unreadable", "message": _text(str(failure)), "traceback": None}
    if not isinstance(record, dict):
        return {"type": "unknown", "message": _text(repr(record)), "traceback": None}
    module, _, name = str(record.get("type", "unknown")).rpartition(":")
    traceback = record.get("traceback")
    return {
        "type": _text(name if module in ("", "builtins") else f"{module}.{name}"),
        "message": _text(str(record.get("message", ""))),
        "traceback": _text(traceback) if isinstance(traceback, str) and traceback else None,
    }
