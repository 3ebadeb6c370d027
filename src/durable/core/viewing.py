"""JSON trees as plain data for people to read: what ``serde.loads(..., view=True)`` gives.

Viewing looks nothing up and builds no object of an application's class: a tag naming
a class (a dataclass, an Enum, a pydantic model, an exception) becomes a description
made from the stored tree alone, so showing a row never imports a module or runs a
class's code, and works in a process that has none of the application's code. The
other tags (datetimes, decimals, UUIDs, bytes, tuples, sets...) decode as usual; none of
them looks anything up either.

A view never fails: a node that cannot be read becomes ``{"unreadable": reason}`` and
the rest still shows, and nesting deeper than `DEPTH` is cut off the same way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from .decoding import _DECODERS, Decoder
from .encoding import TAG

#: Nesting shown before a value is cut off (marked unreadable there).
DEPTH = 50
UNREADABLE = "unreadable"


def unreadable(reason: str) -> dict[str, str]:
    """How a view shows what it cannot read."""
    return {UNREADABLE: reason}


class Viewer(Decoder):
    """Decodes one tree for display (see the module docstring)."""

    __slots__ = ("depth",)

    def __init__(self) -> None:
        super().__init__(may_unpickle=False)
        self.depth = 0

    def decode(self, node: Any) -> Any:
        t = type(node)
        if t is not list and t is not dict:
            return node
        if self.depth >= DEPTH:
            return unreadable(f"nested deeper than {DEPTH} levels; not shown")
        self.depth += 1
        try:
            if t is list:
                return [self.decode(v) for v in node]
            tag = node.get(TAG)
            if tag is None:
                return {k: self.decode(v) for k, v in node.items()}
            view = _VIEWS.get(tag) if type(tag) is str else None
            if view is None:
                return unreadable(f"a value with the unknown type tag {tag!r}")
            try:
                return view(self, node)
            except Exception as error:
                return unreadable(f"a {tag} value that cannot be read ({_reason(error)})")
        finally:
            self.depth -= 1


def _reason(error: Exception) -> str:
    try:
        return f"{type(error).__name__}: {error}"
    except Exception:
        return type(error).__name__


def _name(node: dict[str, Any]) -> str:
    """The class a tag names, without its module: ``Order`` for ``app.models:Order``."""
    ref = node["cls"]
    if type(ref) is not str:
        raise ValueError("the class name is not a string")
    return ref.rpartition(":")[2]


def _fields(viewer: Viewer, node: dict[str, Any], key: str) -> dict[str, Any]:
    state = viewer.decode(node[key])
    return state if type(state) is dict else {"value": state}


def _dataclass(viewer: Viewer, node: dict[str, Any]) -> dict[str, Any]:
    return {"type": _name(node), **_fields(viewer, node, "v")}


def _pydantic(viewer: Viewer, node: dict[str, Any]) -> dict[str, Any]:
    return {"type": _name(node), **_fields(viewer, node, "json" if "json" in node else "v")}


def _enum(viewer: Viewer, node: dict[str, Any]) -> str:
    return f"{_name(node)}({viewer.decode(node['v'])!r})"


def _exception(viewer: Viewer, node: dict[str, Any]) -> str:
    args = viewer.decode(node["args"])
    shown = ", ".join(map(repr, args)) if type(args) is list else repr(args)
    return f"{_name(node)}({shown})"


def _keyed(viewer: Viewer, node: dict[str, Any]) -> dict[Any, Any]:
    """A dict with keys JSON has no type for; a key a view cannot hash shows as text."""
    shown: dict[Any, Any] = {}
    for stored, value in node["v"]:
        key = viewer.decode(stored)
        try:
            hash(key)
        except TypeError:
            key = repr(key)
        shown[key] = viewer.decode(value)
    return shown


def _members(viewer: Viewer, node: dict[str, Any]) -> list[Any]:
    """A set's members, in a stable order (a view may not be able to hash them)."""
    return sorted((viewer.decode(v) for v in node["v"]), key=repr)


def _clock(cls: type[dt.datetime] | type[dt.time], node: dict[str, Any]) -> Any:
    # The stored text has the offset; the zone name is not looked up (no tz database).
    return cls.fromisoformat(node["v"])


def _big_int(_viewer: Viewer, node: dict[str, Any]) -> int | str:
    value = int(node["v"], 16)
    # Past what int() can print (sys.set_int_max_str_digits), show the stored hex.
    return value if value.bit_length() <= 10_000 else str(node["v"])


_VIEWS: dict[str, Callable[[Viewer, dict[str, Any]], Any]] = {
    **_DECODERS,
    "int": _big_int,
    "dict": _keyed,
    "set": _members,
    "frozenset": _members,
    "datetime": lambda _v, n: _clock(dt.datetime, n),
    "time": lambda _v, n: _clock(dt.time, n),
    "enum": _enum,
    "dataclass": _dataclass,
    "pydantic": _pydantic,
    "exception": _exception,
    "pickle": lambda _v, _n: unreadable("a pickled value, not unpickled for display"),
}
