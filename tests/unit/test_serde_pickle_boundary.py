"""Payload encoding (`durable.core.serde`): the pickle boundary. Only a ``P`` payload
read with pickling allowed is unpickled; what the tags cannot express is stored by
cloudpickle, and only when allowed."""

from __future__ import annotations

import base64
import dataclasses
import json
import pickle
from pathlib import Path
from typing import Any

import cloudpickle

from durable.core.serde import dumps, loads
from durable.errors import PickleRefused, SerializationError
from tests.unit._serde_helpers import Point, catch


class Touch:
    """Unpickling this creates a file: proof that a pickle was (or was not) loaded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.path,))


def pickle_tag(obj: Any) -> dict[str, str]:
    return {"$durable": "pickle", "v": base64.b64encode(pickle.dumps(obj)).decode("ascii")}


# -- the pickle boundary -----------------------------------------------------------------


def test_pickle_sentinel_works_when_loading_is_allowed(tmp_path: Path) -> None:
    """Control: the sentinel pickle does create its file when a P payload may be loaded."""
    sentinel = tmp_path / "unpickled"
    payload = b"P" + json.dumps(pickle_tag(Touch(sentinel))).encode()
    loads(payload, allow_pickle=True)
    assert sentinel.exists()


def test_plain_json_payload_with_a_pickle_tag_is_refused_unloaded(tmp_path: Path) -> None:
    """A j payload holding a pickle tag raises PayloadError and the pickle never runs."""
    sentinel = tmp_path / "unpickled"
    payload = b"j" + json.dumps({"a": [pickle_tag(Touch(sentinel))]}).encode()
    error = catch(lambda: loads(payload, allow_pickle=True, run_id="run-1", position=4))
    assert type(error) is PickleRefused and error.reason == "smuggled"
    assert "run-1" in str(error)
    assert "position 4" in str(error)
    assert (error.run_id, error.position) == ("run-1", 4)
    assert not sentinel.exists()


def test_pickled_payload_is_refused_when_pickling_is_disabled(tmp_path: Path) -> None:
    """A P payload read with allow_pickle=False raises PayloadError without unpickling."""
    sentinel = tmp_path / "unpickled"
    payload = b"P" + json.dumps(pickle_tag(Touch(sentinel))).encode()
    error = catch(lambda: loads(payload, allow_pickle=False, run_id="run-2"))
    assert type(error) is PickleRefused and error.reason == "pickling disabled"
    assert "run-2" in str(error)
    assert "allow_pickle" in str(error)
    assert not sentinel.exists()


def test_plain_object_round_trips_through_pickle_when_allowed() -> None:
    """An object only pickle can store round-trips with allow_pickle and marks the payload P."""
    payload = dumps({"points": [Point(1, 2)]}, allow_pickle=True, where="v")
    assert payload[:1] == b"P"
    # Only the sub-value is pickled: the rest stays readable JSON.
    assert json.loads(payload[1:])["points"][0]["$durable"] == "pickle"
    assert loads(payload, allow_pickle=True) == {"points": [Point(1, 2)]}


def test_lambda_round_trips_through_cloudpickle_when_allowed() -> None:
    """A lambda (pickled by value) round-trips and still computes the same thing."""
    offset = 10
    payload = dumps(lambda n: n + offset, allow_pickle=True, where="v")
    assert payload[:1] == b"P"
    assert loads(payload, allow_pickle=True)(5) == 15


def test_locally_defined_dataclass_is_pickled_not_tagged() -> None:
    """A dataclass defined in a function cannot be imported by name, so it is never tagged."""

    @dataclasses.dataclass
    class Local:
        x: int

    payload = dumps(Local(1), allow_pickle=True, where="v")
    assert payload[:1] == b"P"
    assert loads(payload, allow_pickle=True) == Local(1)
    error = catch(lambda: dumps([Local(1)], allow_pickle=False, where="the output"))
    assert type(error) is SerializationError
    assert "cannot be imported" in str(error)
    assert "[0]" in str(error)


def test_cloudpickle_is_what_stores_pickled_values() -> None:
    """The pickle tag holds cloudpickle bytes (loadable by cloudpickle directly)."""
    payload = dumps(Point(7, 8), allow_pickle=True, where="v")
    raw = base64.b64decode(json.loads(payload[1:])["v"])
    assert cloudpickle.loads(raw) == Point(7, 8)
