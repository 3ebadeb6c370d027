"""Security: pickles are off unless opted into, and a refused pickle row never runs
its code."""

from __future__ import annotations

import base64
import json
import logging
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import execute
from durable.core.signing import Signer
from durable.errors import ConfigurationError, PayloadError, PickleRefused, SerializationError
from tests.unit._security_helpers import (
    KEY,
    Opaque,
    _no_key_from_the_environment,  # noqa: F401 (autouse fixture)
    echo,
    evil_payload,
)

# -- pickling disabled ---------------------------------------------------------------------


def test_pickle_free_engine_never_loads_a_pickle(tmp_path: Path) -> None:
    """allow_pickle=False refuses unsigned and signed pickles alike; nothing runs."""
    marker = tmp_path / "pwned"
    signed = Signer(KEY.encode()).sign(evil_payload(marker))
    for key in (None, KEY):
        with durable.Engine("memory://", allow_pickle=False, secret_key=key) as engine:
            for data in (evil_payload(marker), signed):
                with pytest.raises(PickleRefused) as caught:
                    engine.load(data, "r", 0)
                assert caught.value.reason == "pickling disabled"
            with pytest.raises(PickleRefused):
                engine.load_error(evil_payload(marker), "r", 0)
    assert not marker.exists()


def test_pickles_are_off_by_default(tmp_path: Path) -> None:
    """With no option and no environment, a pickle is neither written nor loaded: the
    refusal says how to opt in, and an unsigned row's code never runs."""
    marker = tmp_path / "pwned"
    with durable.Engine("memory://") as engine:
        assert engine.allow_pickle is False
        with pytest.raises(PickleRefused) as caught:
            engine.load(evil_payload(marker), "r", 0)
        assert caught.value.reason == "pickling disabled"
    assert not marker.exists()
    with durable.configure("memory://"), pytest.raises(SerializationError) as refused:
        execute(echo, Opaque(1), id="opaque")
    message = str(refused.value)
    assert "allow_pickle=True" in message and "DURABLE_ALLOW_PICKLE=1" in message
    assert "DURABLE_SECRET_KEY" in message


def test_the_environment_turns_pickles_on_and_an_option_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``DURABLE_ALLOW_PICKLE`` is for processes whose code does not say (workers); an
    explicit ``allow_pickle`` wins over it; a value that is not a yes or a no is refused."""
    for value, expected in (("1", True), ("true", True), ("0", False), ("", False)):
        monkeypatch.setenv("DURABLE_ALLOW_PICKLE", value)
        with durable.Engine("memory://") as engine:
            assert engine.allow_pickle is expected, value
    monkeypatch.setenv("DURABLE_ALLOW_PICKLE", "1")
    with durable.Engine("memory://", allow_pickle=False) as engine:
        assert engine.allow_pickle is False
    monkeypatch.setenv("DURABLE_ALLOW_PICKLE", "maybe")
    with pytest.raises(ConfigurationError, match="DURABLE_ALLOW_PICKLE must be 1 or 0"):
        durable.Engine("memory://")


def test_pickles_without_a_key_warn_once_at_start(caplog: pytest.LogCaptureFixture) -> None:
    """Opting in without a secret key logs one warning naming the fix; with a key, or with
    pickles off, nothing is logged."""
    with caplog.at_level(logging.WARNING, logger="durable"):
        with durable.configure("memory://", allow_pickle=True):
            assert execute(echo, Opaque(3), id="o") == Opaque(3)
        warned = [r for r in caplog.records if "allow_pickle is on" in r.getMessage()]
        assert len(warned) == 1 and "DURABLE_SECRET_KEY" in warned[0].getMessage()
        caplog.clear()
        durable.Engine("memory://", allow_pickle=True, secret_key=KEY).close()
        durable.Engine("memory://").close()
    assert not [r for r in caplog.records if "allow_pickle" in r.getMessage()]


def test_the_evil_payload_is_live(tmp_path: Path) -> None:
    """Control: without a key and with pickling on, the payload does run its code, so the
    tests above that find no marker prove something."""
    marker = tmp_path / "pwned"
    with durable.Engine("memory://", allow_pickle=True) as engine:
        engine.load(evil_payload(marker), "r", 0)
    assert marker.exists()


def test_a_pickle_that_exits_fails_as_a_payload_error() -> None:
    """Unpickling that raises SystemExit is a PayloadError, not the end of a worker thread."""
    node = {"$durable": "pickle", "v": base64.b64encode(pickle.dumps(_Exits())).decode()}
    with (
        durable.Engine("memory://", allow_pickle=True) as engine,
        pytest.raises(PayloadError, match="SystemExit"),
    ):
        engine.load(b"P" + json.dumps(node).encode(), "r", 0)


class _Exits:
    def __reduce__(self) -> tuple[Any, ...]:
        return (sys.exit, (3,))
