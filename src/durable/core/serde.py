"""Payloads: the one place where values become stored bytes and back.

A payload is one header byte and a body:

* ``j`` + JSON: only JSON and durable's type tags (tuples, sets, bytes, datetimes,
  decimals, UUIDs, enums, dataclasses, pydantic models). Loading it never unpickles.
* ``P`` + JSON that may also hold cloudpickled sub-values, for what the tags cannot
  express. Loading one needs ``allow_pickle``.
* ``S`` + key id + HMAC tag + a ``P`` payload: written instead of ``P`` when the engine
  has a secret key, and then the only pickles it loads (see `signing.py`).

The JSON tree is made by `encoding.py` and read back by `decoding.py`. Keeping pickles
inside JSON leaves the rest of a value readable in the dashboard, and the header makes
a pickle impossible to smuggle into a row that claims plain JSON.
A payload larger than the engine's ``max_payload`` is refused when it is made.
Classes named in tags are looked up among the modules the process has imported (never
imported for it, see `classes.py`) and must be what the tag says (a dataclass, an Enum,
a pydantic model, an exception) before anything is constructed. Loading for display
(``view=True``) looks nothing up at all (see `viewing.py`).
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable
from typing import Any

from durable.errors import PayloadError, PayloadTooLarge, PickleRefused, SerializationError

from .classes import NotImported
from .decoding import Decoder, RefusedPickle
from .encoding import JSON_INT_BITS, TAG, Encoder, Unencodable, big_int
from .signing import SIGNED, BadSignature, Signer
from .viewing import Viewer

JSON = b"j"
PICKLED = b"P"
#: The default `Engine.max_payload`: far above what belongs in a database row, far
#: below what makes a worker run out of memory or the database refuse the row.
DEFAULT_MAX_PAYLOAD = 64 * 1024 * 1024

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
# For text UTF-8 cannot hold (lone surrogates, e.g. from os.fsdecode): \u escapes can.
_dumps_ascii = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
# The C scanner itself: JSONDecoder.decode adds two regex matches per call, and durable
# never writes whitespace around a payload.
_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _loads(text: str) -> Any:
    try:
        value, end = _scan(text, 0)
    except StopIteration as stop:  # how the scanner says "no JSON value here"
        raise ValueError(f"no JSON value at character {stop.value}") from None
    if end != len(text):
        raise ValueError(f"extra data after the JSON value, at character {end}")
    return value


def _json_bytes(tree: Any) -> bytes:
    text = _dumps(tree)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _dumps_ascii(tree).encode("ascii")


def _int_json(value: int) -> str:
    if value.bit_length() <= JSON_INT_BITS:
        return int.__repr__(value)
    return _dumps(big_int(value))


_encode_str: Callable[[str], str] = json.encoder.encode_basestring

_SCALAR_ENCODERS: dict[type, Callable[[Any], str]] = {
    int: _int_json,
    str: _encode_str,
    bool: lambda v: "true" if v else "false",
    type(None): lambda _v: "null",
}


def _flat_dict(value: dict[Any, Any]) -> bytes | None:
    """The payload of a dict of str keys and int, str, bool or None values (a task's
    arguments, usually), byte for byte what the general path writes; None for any
    other dict. Writing it directly costs a third of the general path."""
    parts = []
    for key, item in value.items():
        scalar = _SCALAR_ENCODERS.get(type(item))
        if scalar is None or type(key) is not str or key == TAG:
            return None
        parts.append(f"{_encode_str(key)}:{scalar(item)}")
    try:
        return JSON + ("{" + ",".join(parts) + "}").encode("utf-8")
    except UnicodeEncodeError:
        return None  # a lone surrogate: the general path escapes it


def dumps(
    value: Any,
    *,
    allow_pickle: bool,
    where: str | Callable[[], str],
    signer: Signer | None = None,
    max_size: int | None = None,
) -> bytes:
    """Encode *value* as a payload.

    Args:
        value: what to store.
        allow_pickle: whether values JSON cannot express may be cloudpickled.
        where: names the value in an error, e.g. ``"argument 'n' of workflow 'app.f'"``,
            or a function that returns that text (only called when encoding fails).
        signer: signs the payload if it holds a pickle.
        max_size: the most bytes the payload may have.

    Raises:
        SerializationError: the value cannot be stored. Nothing has been written.
        PayloadTooLarge: it is larger than *max_size*. Nothing has been written.
    """
    scalar = _SCALAR_ENCODERS.get(type(value))
    if scalar is not None:
        try:
            data = JSON + scalar(value).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: the general path escapes it
        else:
            if max_size is not None and len(data) > max_size:
                raise _too_large(where, value, len(data), max_size)
            return data
    if type(value) is dict:
        flat = _flat_dict(value)
        if flat is not None:
            if max_size is not None and len(flat) > max_size:
                raise _too_large(where, value, len(flat), max_size)
            return flat
    encoder = Encoder(allow_pickle)
    try:
        body = _json_bytes(encoder.encode(value))
    except Unencodable as error:
        path = "".join(reversed(error.path))
        raise _cannot_store(where, path, error.value, error.reason) from None
    except RecursionError:
        reason = "it is nested too deeply or contains itself"
        raise _cannot_store(where, "", value, reason) from None
    except Exception as error:
        # User code that runs while encoding (a model_dump(), a property) failed.
        reason = f"encoding it raised {type(error).__name__}: {_safe_str(error)}"
        raise _cannot_store(where, "", value, reason) from error
    data = seal(body, pickled=encoder.pickled, signer=signer)
    if max_size is not None and len(data) > max_size:
        raise _too_large(where, value, len(data), max_size)
    return data


def seal(body: bytes, *, pickled: bool, signer: Signer | None) -> bytes:
    """The payload for the JSON *body*: ``j``, or ``P`` (signed when there is a key)."""
    if not pickled:
        return JSON + body
    if signer is None:
        return PICKLED + body
    return signer.sign(PICKLED + body)


def _too_large(
    where: str | Callable[[], str], value: Any, size: int, limit: int
) -> PayloadTooLarge:
    bad = type(value)
    type_name = f"{bad.__module__}.{bad.__qualname__}"
    where = where if isinstance(where, str) else where()
    return PayloadTooLarge(
        f"Cannot store {where}: it is {size:,} bytes encoded, over the payload limit of "
        f"{limit:,} bytes (max_payload). Keep large data out of durable's database: store it "
        "elsewhere (a file, object storage, a table of your own) and pass a reference to it, "
        "or raise the limit with configure(max_payload=...) / Engine(max_payload=...).",
        where=where,
        type_name=type_name,
        size=size,
        limit=limit,
    )


def _cannot_store(
    where: str | Callable[[], str], path: str, value: Any, reason: str
) -> SerializationError:
    bad = type(value)
    type_name = f"{bad.__module__}.{bad.__qualname__}"
    inner = f" (at {path})" if path else ""
    where = where if isinstance(where, str) else where()
    return SerializationError(
        f"Cannot store {where}{inner}: a value of type {type_name} cannot be stored because "
        f"{reason}. Pass plain data (JSON types, dataclasses, pydantic models, datetimes, "
        "...), or opt in to pickles with allow_pickle=True (or DURABLE_ALLOW_PICKLE=1) "
        "and a secret key (DURABLE_SECRET_KEY): see docs/guarantees.md, Security.",
        where=where,
        type_name=type_name,
    )


def loads(
    data: bytes,
    *,
    allow_pickle: bool,
    run_id: str | None = None,
    position: int | None = None,
    signer: Signer | None = None,
    view: bool = False,
) -> Any:
    """Decode a payload made by `dumps`.

    Args:
        signer: with a secret key configured, the only pickles loaded are those whose
            signature verifies under one of its keys.
        view: decode for display (`viewing.Viewer`): classes named in tags are described,
            not looked up or built, and a part that cannot be read is marked so instead
            of failing the whole value.

    Raises:
        PickleRefused: the payload holds a pickle that may not be loaded: pickling is
            disabled, it is unsigned while a key is configured, or its signature does not
            verify. Nothing is unpickled then.
        PayloadError: the payload is corrupt or names a class that is not what it claims.
    """
    header = bytes(data[:1])
    if header != JSON:
        if header not in (SIGNED, PICKLED):
            raise PayloadError(
                f"{_where(run_id, position)} is not a durable payload (unknown header "
                f"{header!r}); the row is corrupt or was written by something else.",
                run_id=run_id,
                position=position,
            )
        data = _trusted(
            data, allow_pickle=allow_pickle, signer=signer, run_id=run_id, position=position
        )
        header = PICKLED
    try:
        tree = _loads(bytes(data[1:]).decode("utf-8"))
        if type(tree) is not dict and type(tree) is not list:
            return tree  # a scalar: nothing to decode
        if view:
            return Viewer().decode(tree)
        return Decoder(header == PICKLED).decode(tree)
    except RefusedPickle:
        raise PickleRefused(
            f"{_where(run_id, position)} claims to be plain JSON but contains a pickle; it was "
            "not loaded.",
            run_id=run_id,
            position=position,
            reason="smuggled",
        ) from None
    except NotImported as error:
        where = _where(run_id, position)
        raise PayloadError(f"{where} {error}.", run_id=run_id, position=position) from None
    except RecursionError:
        raise PayloadError(
            f"{_where(run_id, position)} is nested too deeply to decode; the row is corrupt "
            "or was written by something else.",
            run_id=run_id,
            position=position,
        ) from None
    except (Exception, SystemExit) as error:
        # SystemExit too: a value whose unpickling exits must fail its run, not end the
        # worker's thread and leave the run to be retried forever.
        raise PayloadError(
            f"{_where(run_id, position)} cannot be decoded ({type(error).__name__}: {error}); "
            "the row is corrupt or names a type this code no longer has.",
            run_id=run_id,
            position=position,
        ) from error


def _trusted(
    data: bytes,
    *,
    allow_pickle: bool,
    signer: Signer | None,
    run_id: str | None,
    position: int | None,
) -> bytes:
    """The ``P`` payload inside *data* (``P`` or ``S``) if its pickles may be loaded."""
    header = bytes(data[:1])
    where = _where(run_id, position)
    if not allow_pickle:
        raise _refused(
            f"{where} holds a pickled value and pickling is disabled (allow_pickle=False); it "
            "was not loaded.",
            run_id,
            position,
            "pickling disabled",
        )
    if header == PICKLED:
        if signer is None:
            return data
        raise _refused(
            f"{where} holds a pickle that is not signed, while a secret key is configured; it "
            "was not loaded (a pickle runs code when loaded, so only signed ones are trusted). "
            "If the row was written before signing was turned on and you trust it, re-sign it "
            "(Engine.resign); otherwise someone who can write the database put it there.",
            run_id,
            position,
            "unsigned",
        )
    if signer is None:
        raise _refused(
            f"{where} holds a signed pickle, but this engine has no secret key to verify it; it "
            "was not loaded. Set secret_key (or $DURABLE_SECRET_KEY) to the key that wrote it.",
            run_id,
            position,
            "no key",
        )
    try:
        inner = signer.open(data)
    except BadSignature as bad:
        raise _refused(f"{where} {bad}. It was not loaded.", run_id, position, bad.reason) from None
    if inner[:1] != PICKLED:
        raise PayloadError(
            f"{where} is signed but holds no pickled payload; the row is corrupt.",
            run_id=run_id,
            position=position,
        )
    return inner


def _refused(message: str, run_id: str | None, position: int | None, reason: str) -> PickleRefused:
    return PickleRefused(message, run_id=run_id, position=position, reason=reason)


def resign(data: bytes, signer: Signer) -> bytes:
    """*data* signed with the signer's current key, never unpickling anything.

    An unsigned pickle is signed as it is: only re-sign rows you trust. A signed one must
    verify under one of the signer's keys (key rotation); plain JSON is returned as is.

    Raises:
        PickleRefused: a signed payload that does not verify.
        PayloadError: not a durable payload.
    """
    header = bytes(data[:1])
    if header == JSON:
        return bytes(data)
    if header == SIGNED:
        data = _trusted(data, allow_pickle=True, signer=signer, run_id=None, position=None)
    elif header != PICKLED:
        raise PayloadError(
            f"The payload is not a durable payload (unknown header {header!r}).",
            run_id=None,
            position=None,
        )
    return signer.sign(bytes(data))


def _where(run_id: str | None, position: int | None) -> str:
    if run_id is None:
        return "The payload"
    if position is None:
        return f"The payload of run {run_id!r}"
    return f"The payload at position {position} of run {run_id!r}"


def _safe_str(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__}: str() failed>"
