"""Payload encoding (`durable.core.serde`): a value that cannot be stored raises
SerializationError naming where it was, its type and the path to it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from durable.core.serde import dumps
from durable.errors import SerializationError
from tests.unit._serde_helpers import HERE, Frozen, Point, catch


class Exploding(pydantic.BaseModel):
    x: int

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("dump exploded")


def test_refused_pickle_names_where_type_and_path() -> None:
    """Without allow_pickle, SerializationError names the where text, the type and the path."""
    value = {"outer": [1, {"inner": Point(0, 0)}]}
    error = catch(lambda: dumps(value, allow_pickle=False, where="argument 'p' of task 't'"))
    assert type(error) is SerializationError
    assert isinstance(error, TypeError)
    message = str(error)
    assert "argument 'p' of task 't'" in message
    assert f"{HERE}.Point" in message
    assert "['outer'][1]['inner']" in message
    assert error.type_name == f"{HERE}.Point"
    assert error.where == "argument 'p' of task 't'"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        (Point(0, 0), None),
        ((1, Point(0, 0)), "[1]"),
        ({1: Point(0, 0)}, "[1]"),
        ({Point(0, 0): 1}, "[key "),
        ({Point(0, 0)}, "{…}"),
        (Frozen(1, (2, Point(0, 0))), ".y[1]"),
    ],
    ids=["top", "tuple", "non-str-key-dict", "dict-key", "set", "dataclass-field"],
)
def test_error_path_follows_containers(value: Any, path: str | None) -> None:
    """The path in the message leads through tuples, dict keys, sets and dataclass fields."""
    error = catch(lambda: dumps(value, allow_pickle=False, where="w"))
    assert type(error) is SerializationError
    if path is None:
        assert "(at " not in str(error)
    else:
        assert f"(at {path}" in str(error)


@pytest.mark.parametrize(
    ("make", "type_name"),
    [
        (threading.Lock, "_thread.lock"),
        (lambda: (n for n in range(3)), "builtins.generator"),
    ],
    ids=["lock", "generator"],
)
def test_unpicklable_values_fail_even_with_pickling_allowed(
    make: Callable[[], Any], type_name: str
) -> None:
    """Values cloudpickle cannot store raise SerializationError naming their type."""
    error = catch(lambda: dumps({"x": make()}, allow_pickle=True, where="the output"))
    assert type(error) is SerializationError
    assert type_name in str(error)
    assert error.type_name == type_name
    assert "the output" in str(error)


def test_cyclic_value_raises_serialization_error() -> None:
    """A list that contains itself raises SerializationError, not RecursionError."""
    cycle: list[Any] = []
    cycle.append(cycle)
    error = catch(lambda: dumps(cycle, allow_pickle=False, where="w"))
    assert type(error) is SerializationError
    assert "contains itself" in str(error)


def test_failing_model_dump_raises_serialization_error() -> None:
    """User code that fails while encoding surfaces as SerializationError, chained."""
    error = catch(lambda: dumps(Exploding(x=1), allow_pickle=True, where="w"))
    assert type(error) is SerializationError
    assert "dump exploded" in str(error)
    assert isinstance(error.__cause__, RuntimeError)


def test_callable_where_is_called_only_on_failure() -> None:
    """A callable `where` is not called for storable values and is called once on failure."""
    calls: list[int] = []

    def where() -> str:
        calls.append(1)
        return "the lazily named value"

    for value in (1, "s", None, [1, {"a": (2,)}], Frozen(1, ())):
        dumps(value, allow_pickle=False, where=where)
    assert calls == []
    error = catch(lambda: dumps([threading.Lock()], allow_pickle=False, where=where))
    assert calls == [1]
    assert "the lazily named value" in str(error)
    assert error.where == "the lazily named value"


def test_string_where_is_used_verbatim() -> None:
    """A plain-string `where` appears in the message as given."""
    error = catch(lambda: dumps(threading.Lock(), allow_pickle=False, where="output of 'f'"))
    assert "Cannot store output of 'f':" in str(error)
