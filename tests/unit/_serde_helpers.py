"""Shared by the payload-encoding tests (`durable.core.serde`): the module-level types
that several of them store or name in a tag (importable by name, as tags require), and
small helpers."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import ipaddress
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from durable.core.serde import dumps, loads

HERE = __name__  # the module of the types below: tags name them by it


# -- module-level types (importable by name, as tags require) -------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = (0, 255, 0)


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: int
    y: tuple[int, ...]


POST_INIT_CALLS: list[Any] = []


@dataclasses.dataclass
class Derived:
    """Counts __post_init__ runs and derives state in it (both init=False)."""

    x: int
    doubled: int = dataclasses.field(init=False)
    label: str = dataclasses.field(init=False, default="unset")

    def __post_init__(self) -> None:
        POST_INIT_CALLS.append(self.x)
        self.doubled = self.x * 2
        self.label = f"x={self.x}"
        self.note = "not a field"  # derived, outside the declared fields


class Address(pydantic.BaseModel):
    city: str
    zip_code: str


class Host(pydantic.BaseModel):
    """Fields pydantic writes as JSON but durable has no tag for."""

    ip: ipaddress.IPv4Address
    net: ipaddress.IPv4Network
    seen: dt.datetime


class Point:
    """A plain class: only pickle can store it."""

    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)

    def __hash__(self) -> int:
        return hash((self.x, self.y))


TRAP_CALLS: list[str] = []


class Trap:
    """Not a dataclass, Enum, model or exception; records any attempt to build it."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Trap:
        TRAP_CALLS.append("__new__")
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        TRAP_CALLS.append("__init__")


# -- helpers ---------------------------------------------------------------------------


def roundtrip(value: Any, *, allow_pickle: bool = False) -> Any:
    return loads(dumps(value, allow_pickle=allow_pickle, where="v"), allow_pickle=allow_pickle)


def catch(fn: Callable[[], Any]) -> BaseException:
    try:
        fn()
    except BaseException as error:
        return error
    raise AssertionError("expected an exception")


@pytest.fixture(autouse=True)
def _reset_call_logs() -> None:
    POST_INIT_CALLS.clear()
    TRAP_CALLS.clear()
