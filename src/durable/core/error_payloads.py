"""Recorded exceptions: stored with their class, args and attributes; rebuilt as their type.

A failed task or workflow is recorded so that replay raises the same thing: an
exception of the same class (so ``except`` clauses match the same way), with the same
``args`` and attributes. It is rebuilt without calling ``__init__``, whose signature
rarely matches ``args``. What cannot be stored is dropped rather than losing the error,
and an error too large for ``max_payload`` is cut down to its type, message and traceback.
"""

from __future__ import annotations

import traceback
import types
from typing import Any

from durable.errors import PayloadError, RecordedError

from .classes import class_ref, resolve_class
from .decoding import new_error
from .encoding import encode_or_drop, instance_attributes
from .serde import _json_bytes, _safe_str, _where, loads, seal
from .signing import Signer

#: How much of the message and the traceback an error cut down to fit keeps.
_CUT_MESSAGE = 2_000
_CUT_TRACEBACK = 20_000


def dump_error(
    error: BaseException,
    *,
    allow_pickle: bool,
    signer: Signer | None = None,
    max_size: int | None = None,
) -> bytes:
    """Encode an exception so that `load_error` rebuilds one of the same type.

    The class is stored by name with ``args`` and instance attributes; values that
    cannot be stored are dropped rather than failing, because the error must be
    recorded whatever it carries. For the same reason an error larger than *max_size*
    is recorded without its args and attributes, its message and traceback cut short.
    """
    cls = type(error)
    record: dict[str, Any] = {
        "type": class_ref(cls),
        "message": _safe_str(error),
        "traceback": "".join(traceback.format_exception(error)),
    }
    pickled = False
    args = encode_or_drop(list(error.args), allow_pickle)
    if args is not None:  # otherwise load_error falls back to (message,)
        record["args"], pickled = args
    # Builtin slots hold small plain values, so they are never pickled; instance
    # attributes come second and win a clash.
    attributes = [(k, v, False) for k, v in _builtin_attributes(error).items()]
    attributes += [(k, v, allow_pickle) for k, v in instance_attributes(error).items()]
    state: dict[str, Any] = {}
    for key, value, may_pickle in attributes:
        # One attribute that cannot be stored must not lose the error.
        encoded = encode_or_drop(value, may_pickle)
        if encoded is not None:
            state[key], was_pickled = encoded
            pickled = pickled or was_pickled
    if state:
        record["state"] = state
    data = seal(_json_bytes(record), pickled=pickled, signer=signer)
    if max_size is not None and len(data) > max_size:
        return _cut(record, len(data), max_size)
    return data


def _cut(record: dict[str, Any], size: int, limit: int) -> bytes:
    """The error in *record* as plain JSON of bounded size (never pickled)."""
    message = record["message"]
    if len(message) > _CUT_MESSAGE:
        message = message[:_CUT_MESSAGE] + "..."
    note = (
        f" [recorded without its args and attributes: it was {size:,} bytes, over the "
        f"payload limit of {limit:,} (max_payload)]"
    )
    small = {
        "type": record["type"],
        "message": message + note,
        "traceback": record["traceback"][-_CUT_TRACEBACK:],
    }
    return seal(_json_bytes(small), pickled=False, signer=None)


#: ``obj`` is the object an AttributeError was raised on: arbitrary, possibly huge.
_SKIPPED_SLOTS = frozenset({"obj", "__weakref__"})


def _builtin_attributes(error: BaseException) -> dict[str, Any]:
    """Attributes builtin exceptions keep in C slots rather than ``__dict__``.

    An OSError's errno and filename, a SyntaxError's line, an ImportError's name: they
    are not all in ``args``, and `load_error` does not run ``__init__`` to parse them.
    """
    found: dict[str, Any] = {}
    for klass in type(error).__mro__:
        if klass.__module__ != "builtins" or klass is BaseException or klass is object:
            continue
        for name, slot in vars(klass).items():
            if name in _SKIPPED_SLOTS or not isinstance(
                slot, types.MemberDescriptorType | types.GetSetDescriptorType
            ):
                continue
            try:
                value = getattr(error, name)
            except Exception:  # e.g. characters_written, unset on most OSErrors
                continue
            if value is not None:
                found.setdefault(name, value)
    return found


def load_error(
    data: bytes,
    *,
    allow_pickle: bool,
    run_id: str | None = None,
    position: int | None = None,
    signer: Signer | None = None,
) -> BaseException:
    """Rebuild the exception recorded by `dump_error`, of the same type when it imports.

    The instance is created without calling ``__init__`` (whose signature may not match
    ``args``) and gets its ``args`` and attributes back. A class that no longer imports,
    or cannot be rebuilt, becomes a `RecordedError` carrying the original type name and
    traceback.
    """
    record = loads(data, allow_pickle=allow_pickle, run_id=run_id, position=position, signer=signer)
    if not isinstance(record, dict) or "type" not in record:
        raise PayloadError(
            f"{_where(run_id, position)} is not a recorded error.", run_id=run_id, position=position
        )
    message = str(record.get("message", ""))
    recorded_tb = str(record.get("traceback", ""))
    args = record.get("args")
    args = tuple(args) if isinstance(args, list) else (message,)
    try:
        cls = resolve_class(
            record["type"], lambda c: issubclass(c, BaseException), "an exception class"
        )
        error = new_error(cls, args)
    except Exception:
        return RecordedError(
            f"{record['type']}: {message}",
            type_name=record["type"],
            recorded_traceback=recorded_tb,
        )
    state = record.get("state")
    if isinstance(state, dict):
        for key, value in state.items():
            try:
                setattr(error, key, value)
            except Exception:  # read-only (an ExceptionGroup's exceptions) or refused
                continue
    return error
