"""A workflow's properties as stored: JSON snapshots that operators and callers read.

A class workflow's properties are its instance's attributes (those whose names start
with ``_`` are private: neither stored nor shown); a function workflow publishes
values with `durable.set_state`. A snapshot is taken where a stretch of workflow code
ends (at its next durable call, or as the run waits or ends) if the properties
changed, and stored with the step written there. Replay never reads it: it rebuilds
the properties by running the code again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from durable.errors import SerializationError

#: The most a snapshot may take, encoded as JSON.
STATE_LIMIT = 64 * 1024

#: made once: `json.dumps` builds an encoder per call (a third of a snapshot's cost).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
_JSON = "JSON (dicts with string keys, lists, strings, finite numbers, booleans, None)"


def public(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """An instance's properties: its attributes but the private ones (``_name``)."""
    return {name: value for name, value in attributes.items() if not name.startswith("_")}


def encode_state(values: Mapping[str, Any], *, owner: str) -> bytes:
    """*values* as a stored snapshot: JSON with sorted keys (equal properties, equal
    bytes), at most `STATE_LIMIT` bytes. *owner* names the run in errors.

    Raises:
        SerializationError: a property is not JSON (naming it), or the whole is too large.
    """
    try:
        text = _ENCODER.encode(values)
    except (TypeError, ValueError):
        raise _refused(values, owner) from None
    encoded = b"j" + text.encode()
    if len(encoded) > STATE_LIMIT:
        raise SerializationError(
            f"{owner}: its properties take {len(encoded)} bytes as JSON, more than the "
            f"{STATE_LIMIT} allowed. Keep what operators read small (a status, counts, "
            "ids), and name bulk data with a leading underscore to keep it private."
        )
    return encoded


def _refused(values: Mapping[str, Any], owner: str) -> SerializationError:
    """The error naming the first property that is not JSON."""
    for name, value in values.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as error:
            return SerializationError(
                f"{owner}: property {name!r} ({type(value).__name__}) cannot be stored: "
                f"properties must be {_JSON}; {error}. Store plain data, or name the "
                f"attribute _{name} to keep it private (not stored, not shown)."
            )
    return SerializationError(f"{owner}: its properties cannot be stored as {_JSON}.")


def decode_state(data: bytes | None) -> dict[str, Any]:
    """A stored snapshot back as a dict ({} when there is none)."""
    if not data:
        return {}
    value = json.loads(data[1:] if data[:1] == b"j" else data)
    return value if isinstance(value, dict) else {}
