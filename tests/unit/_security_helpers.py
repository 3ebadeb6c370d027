"""Shared by the security tests (and tests/integration/test_bad_rows.py): keys, a value
only a pickle can store, an attacker's pickle, and a clean environment."""

from __future__ import annotations

import base64
import json
import os
import pickle
import shlex
from pathlib import Path
from typing import Any

import pytest

from durable import workflow

KEY = "k" * 32
OTHER_KEY = "o" * 32


class Opaque:
    """A value the type tags cannot express: it is stored as a pickle."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.n == self.n

    __hash__ = None  # type: ignore[assignment]


class Evil:
    """Unpickling this runs a shell command that creates *marker*."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


def evil_payload(marker: Path, *, as_input: bool = False) -> bytes:
    """A ``P`` payload whose loading creates *marker*, as an attacker would write it."""
    node = {"$durable": "pickle", "v": base64.b64encode(pickle.dumps(Evil(marker))).decode()}
    tree: Any = {"args": [node], "kwargs": {}} if as_input else node
    return b"P" + json.dumps(tree).encode()


@pytest.fixture(autouse=True)
def _no_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_SECRET_KEY", raising=False)
    monkeypatch.delenv("DURABLE_OLD_SECRET_KEYS", raising=False)
    monkeypatch.delenv("DURABLE_ALLOW_PICKLE", raising=False)


@workflow
def echo(value: object) -> object:
    return value
