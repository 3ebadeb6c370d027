"""Every input of a request, read and checked at the HTTP boundary: a bad one is a 400
problem+json that names it, before any handler, parser or database sees it.

What is refused, and why:

* a JSON body nested more than `MAX_DEPTH` levels: counted on the raw bytes, without
  recursion, before the parser (which recurses) runs; the payload hash stops at the
  same depth, so deeper arguments could not be told apart anyway;
* text with a NUL character or a lone surrogate: PostgreSQL refuses NUL in ``text``
  and no database stores a lone surrogate as UTF-8; text that is stored (ids, names,
  queues, actors, senders, keys) is also capped at `MAX_TEXT` characters;
* a priority that is not an integer that fits PostgreSQL's ``int4``;
* a time filter outside the years 1 to 9999 (an age like ``99999999999d`` is one),
  or an unreadable one; a limit out of range; a cursor this API did not give out.
"""

from __future__ import annotations

import array
import base64
import binascii
import datetime as dt
import itertools
import json
import math
import re
import time
from typing import Any

from ._http import MAX_BODY, HTTPError, Request
from ._security import Principal

#: The deepest nesting of a JSON body (the body object itself is level 1).
MAX_DEPTH = 64
#: The longest text accepted for a value that is stored: an id, a name, an actor.
MAX_TEXT = 500
#: The range of a run's priority: PostgreSQL's int4, the same on every backend.
PRIORITY_MIN, PRIORITY_MAX = -(2**31), 2**31 - 1
#: The range of a time filter: what a datetime can show in UTC (a day inside, so an
#: offset or a rounding never pushes it out).
EARLIEST = dt.datetime(1, 1, 2, tzinfo=dt.UTC).timestamp()
LATEST = dt.datetime(9999, 12, 31, tzinfo=dt.UTC).timestamp()
MAX_LIMIT = 500

_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
#: a time then " hh:mm": an unencoded "+hh:mm" offset, decoded as a space.
_PLUS = re.compile(r"(\d\d:\d\d(?::\d\d(?:\.\d+)?)?) (\d\d:?\d\d)$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: A JSON string, escapes included (unrolled, so the regex engine does not recurse).
#: An unterminated one runs to the end; possessive, so it never backtracks: linear time.
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
#: Brackets to +1 / -1 (as signed bytes); every other byte is deleted.
_BRACKETS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
#: What a path parameter is, by the collection it is in and its name.
_PATH_NAMES = {
    ("runs", "id"): "run id",
    ("schedules", "id"): "schedule id",
    ("tasks", "name"): "task name",
    ("flows", "id"): "flow id",
    ("flows", "task"): "task name",
}


# -- bodies -----------------------------------------------------------------------------


def body(request: Request) -> dict[str, Any]:
    """The body parsed as a JSON object (an empty body reads as ``{}``).

    Raises:
        HTTPError: 413 for a body over `MAX_BODY`; 400 for anything but a JSON object,
            one nested deeper than `MAX_DEPTH`, or one holding a lone surrogate.
    """
    try:
        length = int(request.environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise HTTPError(400, "The Content-Length header is not a number.") from None
    if length > MAX_BODY:
        raise HTTPError(413, f"The request body is over {MAX_BODY} bytes; send less.")
    raw = request.environ["wsgi.input"].read(length) if length > 0 else b""
    if not raw.strip():
        return {}
    if json_depth(raw) > MAX_DEPTH:
        raise HTTPError(
            400,
            f"The request body is nested more than {MAX_DEPTH} levels deep; send flatter "
            "data (arguments are nested at most that deep).",
        )
    try:
        parsed = json.loads(raw)
    except RecursionError:  # only if the counting above is wrong: never a 500
        raise HTTPError(
            400, f"The request body is nested more than {MAX_DEPTH} levels deep."
        ) from None
    except (ValueError, UnicodeDecodeError) as error:
        raise HTTPError(400, f"The request body is not valid JSON: {error}.") from None
    if not isinstance(parsed, dict):
        raise HTTPError(400, "The request body must be a JSON object, like {}.")
    for name, value in parsed.items():
        _no_surrogates_within(f"field {name!r}", name, value)
    return parsed


def json_depth(raw: bytes) -> int:
    """How deeply *raw* JSON nests arrays and objects, counted without recursion (and
    without parsing: brackets inside strings are skipped; malformed input gives some
    count, and the parser refuses it afterwards)."""
    brackets = _JSON_STRING.sub(b"", raw).translate(_BRACKETS, _NOT_BRACKETS)
    return max(itertools.accumulate(array.array("b", brackets)), default=0)


def field(
    body: dict[str, Any], name: str, kind: type, default: Any = None, *, required: bool = False
) -> Any:
    """``body[name]``, checked to be a *kind* (JSON null counts as absent)."""
    value = body.get(name)
    if value is None:
        if required:
            raise HTTPError(400, f"The request body needs a {name!r} field.")
        return default
    # bool is an int subclass in Python, but true is not a priority.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        wanted = {str: "a string", list: "an array", dict: "an object", int: "an integer"}
        raise HTTPError(400, f"The {name!r} field must be {wanted[kind]}, not {_shown(value)}.")
    return value


def text(
    body: dict[str, Any], name: str, default: str | None = None, *, required: bool = False
) -> Any:
    """``body[name]`` as text that can be stored: a string of at most `MAX_TEXT`
    characters, with no NUL and no lone surrogate."""
    value = field(body, name, str, default, required=required)
    if value is not None:
        check_text(value, f"The {name!r} field", limit=MAX_TEXT)
    return value


def priority(body: dict[str, Any]) -> int:
    """``body["priority"]``: an integer within int4, 0 when absent."""
    value: int = field(body, "priority", int, 0)
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise HTTPError(
            400,
            f"The 'priority' field must be an integer from {PRIORITY_MIN} to "
            f"{PRIORITY_MAX}, not {_shown(value)}.",
        )
    return value


def position(body: dict[str, Any], name: str) -> int:
    """``body[name]``: a history position, an integer from 0 (required)."""
    value: int = field(body, name, int, required=True)
    if not 0 <= value <= PRIORITY_MAX:
        raise HTTPError(
            400,
            f"The {name!r} field must be a position of the run's history, an integer from "
            f"0, not {_shown(value)}.",
        )
    return value


def actor(body: dict[str, Any], principal: Principal, *names: str) -> str:
    """Who acts: the first of *names* and ``actor`` the body gives, else the principal's
    default ("api" for bearer clients, "dashboard" for browser sessions)."""
    for name in (*names, "actor"):
        value = text(body, name)
        if value is not None and value.strip():
            return str(value.strip())
    return principal.actor


# -- query parameters and paths ---------------------------------------------------------


def query_text(request: Request, name: str) -> str | None:
    """Query parameter *name* (the last one), or None when absent or empty."""
    value = request.arg(name)
    if value is not None:
        check_text(value, f"The query parameter {name!r}")
    return value


def query_texts(request: Request, name: str) -> list[str]:
    """Every value of query parameter *name*, comma lists split, blanks dropped."""
    values = request.args(name)
    for value in values:
        check_text(value, f"The query parameter {name!r}")
    return values


def attributes(request: Request) -> dict[str, str]:
    """``?attr.<key>=<value>``, for each key: the attribute filters of a listing."""
    chosen: dict[str, str] = {}
    for name, values in request.query.items():
        if name.startswith("attr."):
            for value in (name, *values):
                check_text(value, f"The query parameter {name!r}")
            if len(set(values)) > 1:
                raise HTTPError(
                    400, f"{name} is given {len(values)} times; a run holds one value per key."
                )
            chosen[name.removeprefix("attr.")] = values[-1]
    return chosen


def path_params(path: str, params: dict[str, str]) -> dict[str, str]:
    """The values a route matched in *path* (``/api/v1/<collection>/...``), checked
    like any text."""
    collection = path.split("/")[3] if path.count("/") >= 3 else ""
    for name, value in params.items():
        check_text(value, f"The {_PATH_NAMES.get((collection, name), name)} in the path")
    return params


def limit(request: Request) -> int:
    """``?limit=``: 1 to `MAX_LIMIT`, 50 when absent."""
    value = request.arg("limit")
    if value is None:
        return 50
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_LIMIT:
        raise HTTPError(
            400, f"limit must be a whole number from 1 to {MAX_LIMIT}, not {_shown(value)}."
        )
    return int(value)


def moment(request: Request, name: str) -> float | None:
    """Query parameter *name* as epoch seconds: ISO 8601 (UTC unless it says), or an
    age before now like ``30m``, ``2h``, ``7d``; between `EARLIEST` and `LATEST`."""
    value = query_text(request, name)
    if value is None:
        return None
    age = _AGE.fullmatch(value.strip().lower())
    if age is not None:
        at = time.time() - float(age[1]) * _SECONDS[age[2]]
    else:
        try:
            parsed = dt.datetime.fromisoformat(_PLUS.sub(r"\1+\2", value.strip()))
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            at = parsed.timestamp()
        except (ValueError, OverflowError):
            raise HTTPError(
                400,
                f"{name} must be an ISO 8601 time like 2026-01-31T12:00:00Z or an age "
                f"like 30m, 2h or 7d, not {_shown(value)}.",
            ) from None
    if not EARLIEST <= at <= LATEST:  # NaN fails this too
        raise HTTPError(
            400,
            f"{name} is out of range ({_shown(value)}): give a time between the years 1 "
            f"and 9999, or leave {name} out to mean no bound.",
        )
    return at


def cursor(request: Request) -> str | None:
    """``?cursor=``, checked to be one this API gives out: base64 of
    ``[created_at, run_id]``. Passed on as given (the operations layer decodes it)."""
    value = query_text(request, "cursor")
    if value is None:
        return None
    refused = HTTPError(
        400,
        f"The cursor {_shown(value)} is not one this API gave out; start again without it.",
    )
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        if json_depth(raw) > 1:
            raise refused
        decoded = json.loads(raw)
    except (ValueError, binascii.Error, RecursionError):
        raise refused from None
    if not (
        isinstance(decoded, list)
        and len(decoded) == 2
        and isinstance(decoded[0], int | float)
        and not isinstance(decoded[0], bool)
        and math.isfinite(decoded[0])
        and isinstance(decoded[1], str)
    ):
        raise refused
    try:
        check_text(decoded[1], "The run id in the cursor")
    except HTTPError:
        raise refused from None
    return value


# -- text -------------------------------------------------------------------------------


def check_text(value: str, what: str, *, limit: int | None = None) -> None:
    """Raise a 400 naming *what* unless *value* is text every backend stores as given:
    no NUL, no lone surrogate, and (with *limit*) at most that many characters."""
    if limit is not None and len(value) > limit:
        raise HTTPError(
            400, f"{what} is {len(value)} characters long; at most {limit} are allowed."
        )
    if "\x00" in value:
        raise HTTPError(
            400,
            f"{what} contains a NUL character (\\u0000, %00) at position "
            f"{value.index(chr(0))}; remove it (databases do not store it in text).",
        )
    _no_surrogate(what, value)


def _no_surrogate(what: str, value: str) -> None:
    if value.isascii():
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise HTTPError(
            400,
            f"{what} contains a lone surrogate ({value[error.start]!r}) at position "
            f"{error.start}, which is not text: send valid UTF-8 (or \\u escapes in pairs).",
        ) from None


def _no_surrogates_within(what: str, key: str, value: Any) -> None:
    """Every string in *value* (keys too), walked without recursion, is valid text."""
    _no_surrogate(what, key)
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            _no_surrogate(what, item)
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            for inner_key, inner in item.items():
                _no_surrogate(what, inner_key)
                pending.append(inner)


def _shown(value: Any) -> str:
    """*value* for an error message, cut short: a message never echoes a megabyte."""
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."
