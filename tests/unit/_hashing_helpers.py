"""Shared by the call-identity tests (`durable.core.hashing`): the module-level types
several of them hash (the canonical form names them by this module), `h` and `linked`."""

from __future__ import annotations

import dataclasses
import enum
import itertools
from typing import Any

from durable.core.hashing import call_hash

HERE = __name__  # the module of the types below, as canonical forms name them


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Shade(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Item:
    sku: str
    qty: int
    tags: set[str] = dataclasses.field(default_factory=set)


class Account:
    def __init__(self, owner: str, balance: int) -> None:
        self.owner = owner
        self.balance = balance


class Opaque:
    """Nothing to look at: no __dict__, no fields."""

    __slots__ = ("secret",)

    def __init__(self, secret: int) -> None:
        self.secret = secret


class Mixin:
    """Takes no constructor arguments: calling Mixin("abc") raises TypeError."""

    def describe(self) -> str:
        return "mixed in"


class Name(str, Mixin):
    __slots__ = ()


class Node:
    def __init__(self, value: int) -> None:
        self.value = value
        self.prev: Node | None = None
        self.next: Node | None = None


def h(**arguments: Any) -> str:
    return call_hash("task", "app.f", arguments)


def linked(n: int) -> Node:
    nodes = [Node(i) for i in range(n)]
    for a, b in itertools.pairwise(nodes):
        a.next, b.prev = b, a
    return nodes[0]
