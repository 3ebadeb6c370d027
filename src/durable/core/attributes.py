"""Run attributes: short typed values a run is searched by (``customer=c-42``).

A run's attributes are a flat mapping of keys to a str, int, float or bool, given at
dispatch (``attributes=``) or set by its workflow (`durable.set_attributes`). They are
stored apart from the run, one row per key, as a canonical text with its type, and a
filter matches on that text: ``customer=c-42`` finds the run whose ``customer`` is the
string ``"c-42"``, ``n=5`` the runs whose ``n`` is the int 5, the float 5.0 or the
string ``"5"``, ``vip=true`` those whose ``vip`` is True (or the string ``"true"``).
Several filters must all match.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .text import check_text

#: A value an attribute may hold. bool is its own type here, not an int.
AttributeValue = str | int | float | bool
#: (key, value) pairs, in the order they were given.
Attributes = tuple[tuple[str, AttributeValue], ...]

#: The default most attributes one run may hold (`Engine(max_attributes=)`).
DEFAULT_MAX_ATTRIBUTES = 32
#: The longest key, and the longest value's text, in characters.
MAX_KEY = 64
MAX_VALUE = 256

#: The stored type of a value, one letter each; and back.
_TYPES: dict[type, str] = {str: "s", bool: "b", int: "i", float: "f"}


def check_attributes(given: object, *, limit: int, what: str = "attributes=") -> Attributes:
    """*given* (a mapping of keys to values) as checked pairs.

    Raises:
        TypeError: it is not a mapping, a key is not a str, or a value is not a str,
            int, float or bool (naming the key).
        ValueError: a key is empty, too long or holds ``=``; a value is too long or a
            float that is not finite; more than *limit* keys.
        InvalidValue: a key or value holds text no database can store (a NUL).
    """
    if not isinstance(given, Mapping):
        raise TypeError(
            f"{what} takes a mapping of keys to values, like {{'customer': 'c-42'}}, "
            f"not {type(given).__name__}."
        )
    if len(given) > limit:
        raise ValueError(
            f"{what} gives {len(given)} attributes; a run may hold at most {limit} "
            "(Engine(max_attributes=...) / configure(max_attributes=...) raises the limit)."
        )
    return tuple((check_key(key), check_value(key, value)) for key, value in given.items())


def check_key(key: object) -> str:
    """*key*, if it can name an attribute: a non-empty str of at most `MAX_KEY`
    characters without ``=`` (a filter's separator)."""
    if not isinstance(key, str):
        raise TypeError(f"An attribute key must be a string, not {type(key).__name__} ({key!r}).")
    check_text(key, "an attribute key")
    if not key or len(key) > MAX_KEY or "=" in key:
        raise ValueError(
            f"An attribute key must be 1 to {MAX_KEY} characters without '=': {key!r} is not."
        )
    return key


def check_value(key: str, value: object) -> AttributeValue:
    """*value*, if attribute *key* may hold it."""
    if type(value) not in _TYPES:
        raise TypeError(
            f"Attribute {key!r} must be a str, int, float or bool, not "
            f"{type(value).__name__} ({value!r:.60}): attributes are for searching runs; "
            "keep structured data in the run's arguments or state."
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"Attribute {key!r} must be a finite number, not {value!r}.")
    text = canonical(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        check_text(value, f"attribute {key!r}")
    if len(text) > MAX_VALUE:
        raise ValueError(
            f"Attribute {key!r} is {len(text)} characters long; at most {MAX_VALUE} are "
            "kept for searching."
        )
    return value  # type: ignore[return-value]


def canonical(value: AttributeValue) -> str:
    """The text a filter matches *value* on: a str as it is, ``true``/``false``, an int
    in decimal, and a float as an int when it is one (``5.0`` -> ``5``), else its repr."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 2.0**53:
            return str(int(value))
        return repr(value)
    return str(value)


def encode(value: AttributeValue) -> tuple[str, str]:
    """The stored form of *value*: its canonical text and its type letter."""
    return canonical(value), _TYPES[type(value)]


def decode(text: str, kind: str) -> AttributeValue:
    """A stored (text, type letter) back to its value (a str for an unknown letter)."""
    if kind == "b":
        return text == "true"
    if kind == "i":
        return int(text)
    if kind == "f":
        return float(text)
    return text


def parse_filter(text: str) -> tuple[str, str]:
    """``key=value`` (from ``--attr`` or ``?attr.key=value``) as (key, canonical text).

    Raises:
        ValueError: no ``=``, or an empty key.
    """
    key, equals, value = text.partition("=")
    if not equals or not key:
        raise ValueError(
            f"An attribute filter is key=value, like customer=c-42; {text!r} has no "
            f"{'key' if equals else '='}."
        )
    return check_key(key), value


def filters(pairs: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """A mapping of keys to values (typed, or text) as filter pairs (key, canonical
    text), sorted by key."""
    return tuple(
        sorted(
            (
                check_key(key),
                value if isinstance(value, str) else canonical(check_value(key, value)),
            )
            for key, value in pairs.items()
        )
    )


def as_text(attributes: Mapping[str, AttributeValue]) -> str:
    """``customer=c-42, n=5, vip=true``: the attributes as filters match them."""
    return ", ".join(f"{key}={canonical(value)}" for key, value in attributes.items())
