"""The scalar values of a flow file, checked: names, durations, sizes, strings and
lists of them. Each check raises a `FlowFileError` that names the key and says what
would be right; the tables that use them live in `_tables`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

from durable.core.durations import HORIZON

from ._places import Path, Places

# Names appear in run ids, URLs and command lines: no "/", no spaces, and no leading
# "." or "-" (so never "..", never mistaken for an option).
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
NAME_RULE = 'letters, digits, "_", "-" and "." only, starting with a letter, digit or "_"'

_DURATION = re.compile(
    r"(?:(?P<d>\d+(?:\.\d+)?)d)?(?:(?P<h>\d+(?:\.\d+)?)h)?"
    r"(?:(?P<m>\d+(?:\.\d+)?)m)?(?:(?P<s>\d+(?:\.\d+)?)s)?"
)
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
DURATION_RULE = 'a number of seconds, or a string such as "90s", "30m", "2h", "1d" or "1h30m"'

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(B|KB|MB|GB)", re.IGNORECASE)
_UNIT_BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
SIZE_RULE = 'a number of bytes, or a string such as "512KB", "1MB" or "2GB" (1 KB = 1024 bytes)'


def kind_of(value: object) -> str:
    """What *value* is, in TOML's words, for messages."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, dt.date | dt.time):
        return f"the date/time {value.isoformat()}"
    return type(value).__name__


def name(places: Places, path: Path, value: object, what: str) -> str:
    """A flow, task or form field name: non-empty, and safe in ids and URLs."""
    text = string(places, path, value)
    if not NAME.fullmatch(text):
        raise places.error(path, f"{what} {text!r} is not allowed: use {NAME_RULE}.")
    return text


def string(places: Places, path: Path, value: object, *, empty: bool = False) -> str:
    """A string without NUL characters (which no command line or file name can hold)."""
    if not isinstance(value, str):
        raise places.error(path, f"must be a string, not {kind_of(value)}.")
    if not empty and not value:
        raise places.error(path, "must not be empty.")
    if "\0" in value:
        raise places.error(path, "must not contain a NUL character.")
    return value


def strings(places: Places, path: Path, value: object, example: str) -> tuple[str, ...]:
    """An array of strings; *example* shows the right shape in messages."""
    if not isinstance(value, list):
        raise places.error(
            path, f"must be an array of strings, e.g. {example}; got {kind_of(value)}."
        )
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise places.error(
                path, f"item {index} must be a string, not {kind_of(item)}; e.g. {example}."
            )
        string(places, path, item, empty=True)
    return tuple(value)


def boolean(places: Places, path: Path, value: object) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise places.error(path, f"must be true or false, not {kind_of(value)}.")
    return value


def positive_int(places: Places, path: Path, value: object, minimum: int = 1) -> int:
    """A whole number (never a boolean) of at least *minimum*."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise places.error(
            path, f"must be a whole number of at least {minimum}, not {kind_of(value)}."
        )
    return value


def table(places: Places, path: Path, value: object) -> dict[str, Any]:
    """A TOML table (``[header]`` or inline ``{ ... }``)."""
    if not isinstance(value, dict):
        raise places.error(path, f"must be a table, not {kind_of(value)}.")
    return value


def duration(places: Places, path: Path, value: object, *, zero: bool = False) -> float:
    """Seconds, from a number or a string like ``"1h30m"``; more than 0 unless *zero*.

    At most durable's horizon (100 years), as every duration durable stores.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
        if not math.isfinite(seconds):
            raise places.error(path, f"must be {DURATION_RULE}, not {kind_of(value)}.")
    elif isinstance(value, str):
        seconds = _parse_duration(places, path, value)
    else:
        raise places.error(path, f"must be {DURATION_RULE}, not {kind_of(value)}.")
    least = "0 or more" if zero else "more than 0"
    if seconds < 0 or (seconds == 0 and not zero):
        raise places.error(path, f"must be {least} seconds, not {kind_of(value)}.")
    if seconds > HORIZON.total_seconds():
        raise places.error(path, f"must be at most 100 years (durable's horizon), not {value!r}.")
    return seconds


def _parse_duration(places: Places, path: Path, text: str) -> float:
    """The seconds in a duration string, each unit (d, h, m, s) at most once, in order."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.groups()):
        raise places.error(path, f"{text!r} is not a duration: use {DURATION_RULE}.")
    return sum(
        float(amount) * _UNIT_SECONDS[unit]
        for unit, amount in match.groupdict().items()
        if amount is not None
    )


def size(places: Places, path: Path, value: object) -> int:
    """A size in bytes, from a whole number or a string like ``"512KB"``; at least 1."""
    if isinstance(value, int) and not isinstance(value, bool):
        count = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value.strip())):
        count = int(float(match.group(1)) * _UNIT_BYTES[match.group(2).upper()])
    else:
        raise places.error(path, f"must be {SIZE_RULE}, not {kind_of(value)}.")
    if count < 1:
        raise places.error(path, f"must be at least 1 byte, not {kind_of(value)}.")
    return count
