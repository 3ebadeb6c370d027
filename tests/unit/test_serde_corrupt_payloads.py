"""Payload encoding (`durable.core.serde`): corrupt rows raise PayloadError naming the
run and position, and never build the classes their tags name."""

from __future__ import annotations

import base64
import json

import pytest

from durable.core.serde import loads
from durable.errors import PayloadError
from tests.unit._serde_helpers import (
    HERE,
    POST_INIT_CALLS,
    TRAP_CALLS,
    Derived,
    _reset_call_logs,  # noqa: F401 (autouse fixture)
    catch,
    roundtrip,
)

# -- corrupt payloads --------------------------------------------------------------------

CORRUPT = {
    "empty": b"",
    "unknown-header": b"x{}",
    "lowercase-p-header": b"p[]",
    "truncated-json": b'j{"a": [1, 2',
    "header-only": b"j",
    "invalid-utf8": b'j"\xff\xfe"',
    "missing-module": b'j{"$durable":"dataclass","cls":"no_such_module_xyz:Thing","v":{}}',
    "missing-class": b'j{"$durable":"dataclass","cls":"' + HERE.encode() + b':Nope","v":{}}',
    "function-as-dataclass": b'j{"$durable":"dataclass","cls":"os:system","v":{}}',
    "function-as-enum": b'j{"$durable":"enum","cls":"os:system","v":"echo hi"}',
    "function-as-model": b'j{"$durable":"pydantic","cls":"os:system","v":{}}',
    "bad-model-json": b'j{"$durable":"pydantic","cls":"' + HERE.encode() + b':Host","json":{}}',
    "no-colon-ref": b'j{"$durable":"dataclass","cls":"os","v":{}}',
    "unknown-tag": b'j{"$durable":"nonsense","v":1}',
    "unhashable-tag": b'j{"$durable":[1],"v":1}',
    "finite-float-tag": b'j{"$durable":"float","v":"1.5"}',
    "bad-base64": b'j{"$durable":"bytes","v":"not base64!"}',
    "bad-timedelta": b'j{"$durable":"timedelta","v":"x"}',
    "bad-datetime": b'j{"$durable":"datetime","v":"yesterday"}',
    "bad-zone": b'j{"$durable":"datetime","v":"2024-01-01T00:00:00+00:00","tz":"No/Where"}',
    "bad-int": b'j{"$durable":"int","v":"0xZZ"}',
    "missing-value": b'j{"$durable":"tuple"}',
    "unhashable-set-item": b'j{"$durable":"set","v":[[1]]}',
    "bad-enum-value": b'j{"$durable":"enum","cls":"' + HERE.encode() + b':Color","v":"blue"}',
    "deep-nesting": b"j" + b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("data", CORRUPT.values(), ids=CORRUPT.keys())
def test_corrupt_payload_raises_payload_error_naming_the_row(data: bytes) -> None:
    """Every corrupt payload raises PayloadError (nothing else) naming run id and position."""
    error = catch(lambda: loads(data, allow_pickle=True, run_id="run-9", position=12))
    assert type(error) is PayloadError
    assert "run-9" in str(error)
    assert "12" in str(error)
    assert (error.run_id, error.position) == ("run-9", 12)


@pytest.mark.parametrize("data", CORRUPT.values(), ids=CORRUPT.keys())
def test_corrupt_payload_without_row_details_still_raises_payload_error(data: bytes) -> None:
    """Without a run id the error is still a PayloadError, about "the payload"."""
    error = catch(lambda: loads(data, allow_pickle=False))
    assert type(error) is PayloadError
    assert str(error).startswith("The payload")
    assert error.run_id is None


def test_run_without_position_is_named_as_the_runs_own_payload() -> None:
    """With a run id but no position the message names the run's own payload."""
    error = catch(lambda: loads(b"", allow_pickle=False, run_id="run-3"))
    assert "The payload of run 'run-3'" in str(error)


def test_pickled_payload_with_garbage_pickle_raises_payload_error() -> None:
    """A P payload whose pickle bytes are garbage raises PayloadError."""
    payload = b'P{"$durable":"pickle","v":"' + base64.b64encode(b"garbage") + b'"}'
    assert type(catch(lambda: loads(payload, allow_pickle=True))) is PayloadError


@pytest.mark.parametrize("tag", ["dataclass", "enum", "pydantic"])
def test_tag_naming_a_wrong_class_never_builds_it(tag: str) -> None:
    """A tag naming a class of the wrong kind fails without calling the class at all."""
    node = {"$durable": tag, "cls": f"{HERE}:Trap", "v": {}}
    error = catch(lambda: loads(b"j" + json.dumps(node).encode(), allow_pickle=True))
    assert type(error) is PayloadError
    assert TRAP_CALLS == []


def test_class_cached_for_one_tag_is_not_accepted_by_another() -> None:
    """A dataclass resolved (and cached) for its own tag is still refused by an enum tag."""
    assert type(roundtrip(Derived(1))) is Derived  # resolves and caches the class
    POST_INIT_CALLS.clear()
    node = {"$durable": "enum", "cls": f"{HERE}:Derived", "v": 7}
    error = catch(lambda: loads(b"j" + json.dumps(node).encode(), allow_pickle=False))
    assert type(error) is PayloadError
    assert POST_INIT_CALLS == []
