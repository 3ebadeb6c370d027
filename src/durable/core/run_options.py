"""The options of a run as users give them, checked at the call: its id, its queue,
its priority, its timeout. Which keywords of each verb are options rather than the function's own
arguments (`VERB_OPTIONS`, `take`). The code version a process stamps its runs with, and
which runs a worker serving only its version claims (`serves`). And the order a worker
starts a claimed batch in, which no stored row can break.

Ids of the form ``<anything>/<digits>`` belong to children: a workflow's child at
position 3 is ``<parent id>/3`` (see `runtime/children.py`). A run a user created
with such an id would take a child's place, so users cannot choose one. Nor ids of
the form ``<anything>~<digits>``: they name the runs of continue-as-new chains
(`durable.core.chains`).
"""

from __future__ import annotations

import inspect
import math
import re
import reprlib
from typing import Any

from .chains import is_chain_form, split
from .durations import seconds
from .functions import Durable
from .text import check_text

#: The longest id or queue name, in UTF-8 bytes.
MAX_NAME_BYTES = 512
#: Priorities are stored as int4 (PostgreSQL ``integer``).
PRIORITY_MIN = -(2**31)
PRIORITY_MAX = 2**31 - 1

#: The run options of each verb, by keyword. In ``verb(fn, *args, **kwargs)`` a keyword
#: named here goes to the run, not to *fn*, and is refused if *fn* has a parameter of
#: that name (`take`). A verb that gains an option adds it here (a test compares this
#: table with the verbs' signatures).
VERB_OPTIONS: dict[str, tuple[str, ...]] = {
    "dispatch": (
        "id",
        "queue",
        "priority",
        "timeout",
        "key",
        "key_concurrency",
        "debounce",
        "connection",
        "attributes",
    ),
    "execute": ("id", "timeout"),
    "execute_async": ("id", "timeout"),
}

_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)

_CHILD_FORM = re.compile(r".*/[0-9]+", re.DOTALL)


def is_child_form(run_id: str) -> bool:
    """Whether *run_id* has the form of a child's id: ``<anything>/<ASCII digits>``."""
    return _CHILD_FORM.fullmatch(run_id) is not None


def _name(value: object, what: str, example: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"A {what} must be a string, like {example!r}, not {value!r}.")
    if not value:
        raise ValueError(f"A {what} must not be empty: give one like {example!r}, or none.")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise ValueError(
            f"A {what} may take at most {MAX_NAME_BYTES} bytes in UTF-8; this one takes "
            f"{size} ({value[:40]!r}...)."
        )
    return check_text(value, f"a {what}")


def check_run_id(run_id: object) -> str:
    """*run_id*, checked to be an id a user may choose.

    Raises:
        TypeError: it is not a string.
        ValueError: it is empty, longer than MAX_NAME_BYTES, or of a child's form or a
            continue-as-new successor's form.
        InvalidValue: it holds a NUL or a lone surrogate (`check_text`).
    """
    checked = _name(run_id, "run id", "order-1042")
    if is_child_form(checked):
        head, _, position = checked.rpartition("/")
        raise ValueError(
            f"Run id {checked!r} has the form of a child run's id (<parent id>/<position>): "
            f"the child at position {position} of run {head!r} would be given it. Ids "
            "ending in '/' and digits are reserved for children; use another separator, "
            f"like {head + '-' + position!r} or {head + '/#' + position!r}."
        )
    if is_chain_form(checked):
        base, link = split(checked)
        raise ValueError(
            f"Run id {checked!r} has the form of a continue-as-new successor's id "
            f"(<base id>~<number>): the run {link} links down the chain that starts at run "
            f"{base!r} would be given it. Ids ending in '~' and digits are reserved for "
            f"such chains; use another separator, like {base + '-' + str(link)!r}."
        )
    return checked


def check_queue(queue: object) -> str:
    """*queue*, checked to be a queue name.

    Raises:
        TypeError: it is not a string.
        ValueError: it is empty or longer than MAX_NAME_BYTES.
        InvalidValue: it holds a NUL or a lone surrogate (`check_text`).
    """
    return _name(queue, "queue name", "default")


def check_version(version: object) -> str:
    """*version*, checked to be a code version (``configure(version=)``, ``durable worker
    --version``): a non-empty string, at most MAX_NAME_BYTES, storable as text.

    Raises:
        TypeError: it is not a string.
        ValueError: it is empty or longer than MAX_NAME_BYTES.
        InvalidValue: it holds a NUL or a lone surrogate (`check_text`).
    """
    return _name(version, "code version", "2024-11-24.1")


def serves(run: Any, version: str) -> bool:
    """Whether a process that claims only runs of *version* (``--only-version``) may
    claim *run*: one of its version, or one that has none (created by a process without
    a version and never started by one with a version: stamped with the claimer's when
    it starts). A run another version created or started is left to that version's
    workers, so an old deploy's workers take nothing new. The storage claims say the
    same."""
    return run.version is None or run.version == version


def serving(version: str | None, only_version: bool) -> str | None:
    """The version a claim is limited to (None: any version), from a claim's
    arguments: *only_version* needs a *version*.

    Raises:
        ValueError: *only_version* without a *version*.
    """
    if not only_version:
        return None
    if version is None:
        raise ValueError("only_version=True claims the runs of one version: give version= too.")
    return version


def check_key(key: object) -> str | None:
    """*key* (or None), checked like a queue name: what runs that must not run
    together share (``key_concurrency``), or that coalesce (``debounce``)."""
    return None if key is None else _name(key, "key", "customer-42")


def check_key_limit(value: object, key: str | None) -> int | None:
    """*value*, checked to be None or a positive int: how many runs of *key* may run
    at once (a limit needs a key)."""
    if value is None:
        return None
    if key is None:
        raise ValueError(
            "key_concurrency= limits the runs that share a key: give key= too, like "
            "dispatch(fn, ..., key='customer-42', key_concurrency=1)."
        )
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"key_concurrency= must be a positive int (runs at once), not {value!r}.")
    if not 1 <= value <= PRIORITY_MAX:
        raise ValueError(
            f"key_concurrency= must be from 1 to {PRIORITY_MAX}, not {value}: a limit of 0 "
            "would never run anything. Leave it out for no limit."
        )
    return value


def check_debounce(debounce: object, key: str | None) -> float | None:
    """*debounce* in seconds (a timedelta or a number), or None; it needs a key."""
    window = seconds(debounce, "debounce=")
    if window is None:
        return None
    if window <= 0:
        raise ValueError(f"debounce= must be a positive duration, not {debounce!r}.")
    if key is None:
        raise ValueError(
            "debounce= coalesces the dispatches that share a key: give key= too, like "
            "dispatch(fn, ..., key='customer-42', debounce=timedelta(seconds=5))."
        )
    return window


def check_priority(priority: object) -> int:
    """*priority*, checked to be an int that fits the database's int4 column.

    Raises:
        TypeError: it is not an int (a bool is not a priority either).
        ValueError: it is outside PRIORITY_MIN..PRIORITY_MAX.
    """
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(
            f"A priority must be an int (higher runs first, 0 by default), not {priority!r}."
        )
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(
            f"A priority must be from {PRIORITY_MIN} to {PRIORITY_MAX} (it is stored as a "
            f"32-bit integer), not {priority}."
        )
    return priority


def check_timeout(timeout: object) -> float | None:
    """*timeout* (a timedelta or seconds, or None) in seconds, checked to be a positive
    duration: the time a run may take from its creation.

    Raises:
        TypeError: it is neither a timedelta nor a number.
        ValueError: it is not above 0, not finite, or beyond durable's 100-year horizon.
    """
    total = seconds(timeout, "A run's timeout")
    if total is not None and total <= 0:
        raise ValueError(
            f"A run's timeout must be a positive duration, got {timeout!r}. Pass a "
            "timedelta or a number of seconds above 0, or None for no deadline."
        )
    return total


def take(
    verb: str, target: object, kwargs: dict[str, Any], *, called: str | None = None
) -> dict[str, Any]:
    """Remove *verb*'s run options from the keywords it was given, and return them.

    What is left in *kwargs* are the function's own keyword arguments. *called* is the
    name the user called, if not *verb* (``env.execute`` takes dispatch's options).

    Raises:
        TypeError: *target* is a workflow or task called flat with a keyword that is
            both one of its parameters and a run option; the message shows the bound
            call to write for either meaning.
    """
    if not kwargs:
        return {}
    options = {name: kwargs.pop(name) for name in VERB_OPTIONS[verb] if name in kwargs}
    if options and isinstance(target, Durable):
        parameters = target.signature.parameters
        for name, value in options.items():
            parameter = parameters.get(name)
            if parameter is not None and parameter.kind in _KEYWORD_KINDS:
                raise TypeError(_clash(called or verb, target, name, value))
    return options


def _clash(verb: str, target: Durable[..., Any], name: str, value: object) -> str:
    fn = getattr(target.fn, "__name__", target.name)
    given = f"{name}={reprlib.repr(value)}"
    return (
        f"{fn}() has a parameter named {name!r}, which is also {verb}()'s run option; "
        f"nothing was done. Say which you mean with a bound call: "
        f"{verb}({fn}.bind(..., {given})) passes it to {fn}(), "
        f"{verb}({fn}.bind(...), {given}) sets the run's {name}, and "
        f"{verb}({fn}.bind(..., {name}=...), {given}) does both."
    )


def _number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not (isinstance(value, float) and math.isnan(value))
    )


def claim_order(run: Any) -> tuple[int, Any, Any]:
    """Sort key of a claimed batch: highest priority first, then oldest.

    A run whose priority or creation time is not a number (SQLite stores whatever it
    is given: a hand-edited row, or one an older version wrote) sorts after the others
    instead of making the sort raise, which would strand the whole claimed batch.
    """
    priority, created = run.priority, run.created_at
    good = _number(priority)
    return (0 if good else 1, -priority if good else 0, created if _number(created) else math.inf)
