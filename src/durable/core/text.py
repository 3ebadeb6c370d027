"""Text durable stores as text: names, ids, keys. Checked where it is given.

PostgreSQL cannot hold a NUL character in text, and UTF-8 (so neither SQLite nor
PostgreSQL) cannot hold a lone surrogate (what ``os.fsdecode`` makes of undecodable
bytes). Such a value would work on one backend and fail on another, deep inside a
worker, so it is refused at the call that gives it: event names, send keys, senders,
run ids, queue names, workflow and task names.
"""

from __future__ import annotations

from durable.errors import InvalidValue


def check_text(value: str, what: str) -> str:
    """*value*, if it is a str durable can store; *what* names it (``"an event name"``).

    Raises:
        InvalidValue: it is not a str, or holds a NUL character or a lone surrogate.
    """
    if type(value) is not str and not isinstance(value, str):
        raise InvalidValue(
            f"{_capital(what)} must be a string, not {type(value).__name__} ({value!r})."
        )
    if "\x00" in value:
        raise InvalidValue(
            f"{_capital(what)} must not contain a NUL character (\\x00): {value!r}. "
            "PostgreSQL cannot store one in text; remove it (or encode the value, e.g. "
            "as hex, if it comes from outside)."
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = value[error.start]
        raise InvalidValue(
            f"{_capital(what)} must not contain a lone surrogate ({bad!r}, at index "
            f"{error.start}): {value!r}. UTF-8 cannot encode one, so no database can store "
            "it; decode the bytes it came from properly (os.fsdecode makes such text)."
        ) from None
    return value


def _capital(what: str) -> str:
    return what[:1].upper() + what[1:]
