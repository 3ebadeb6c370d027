"""Values the database refuses: bad input, told apart from the database failing.

A driver data error (PostgreSQL's SQLSTATE class 22: text it cannot hold, a number out
of range, ...; SQLite's DataError) or a parameter the driver cannot convert (an int too
large for SQLite, text UTF-8 cannot encode, a NUL psycopg will not send) is
deterministic: the same value fails the same way every time. It becomes `InvalidValue`,
which a workflow call raises (the workflow may catch it; otherwise the run fails once),
never `StorageError`, which means an outage and has a worker hand the run back to be
claimed again: for a refused value, again and again, forever.
"""

from __future__ import annotations

from collections.abc import Callable

#: SQLSTATE of "numeric value out of range".
_OUT_OF_RANGE = "22003"


def bad_input(error: BaseException, data_errors: tuple[type[BaseException], ...]) -> bool:
    """Whether *error* is a value refused (see the module docstring); *data_errors* are
    the driver's data error class and the conversion errors."""
    if isinstance(error, data_errors):
        return True
    sqlstate = getattr(error, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate.startswith("22"):
        return True
    return isinstance(error, ValueError) and "NUL" in str(error)


def refusal(
    name: str, where: str, error: BaseException, scrub: Callable[[BaseException], str]
) -> str:
    """The message of the InvalidValue for *error*, raised by the operation *name* on the
    database *where* (a masked URL): what was refused, why, and what to do."""
    if isinstance(error, UnicodeEncodeError) and isinstance(error.object, str):
        text = error.object
        shown = repr(text) if len(text) <= 200 else f"{text[:200]!r}..."
        surrogate = text[error.start]
        why = f"the text {shown} holds a lone surrogate ({surrogate!r}), which UTF-8 cannot encode"
    else:
        why = scrub(error)
    hint = ""
    if "NUL" in why:
        hint = "PostgreSQL cannot store a NUL character (\\x00) in text: remove it. "
    elif isinstance(error, OverflowError) or getattr(error, "sqlstate", None) == _OUT_OF_RANGE:
        hint = "A number is out of the range its column holds (a priority fits in 32 bits). "
    return (
        f"{name} was refused by {where}: {why}. {hint}This is bad input, not an outage: "
        "nothing was written, and retrying the same value cannot succeed."
    )
