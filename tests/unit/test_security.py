"""Security: signed pickles, refused rows that never run code, size limits, no passwords."""

from __future__ import annotations

import base64
import json
import logging
import os
import pickle
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import RunStatus, StepStatus, execute, task, workflow
from durable.core.serde import dumps
from durable.core.signing import HEAD_LEN, Signer, key_id
from durable.errors import (
    ConfigurationError,
    PayloadError,
    PayloadTooLarge,
    PickleRefused,
    SerializationError,
    StorageError,
)
from tests.unit.helpers import history, run

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


class Carrying(Exception):
    """An error that carries an attribute only a pickle can store."""


class Huge(Exception):
    """An error too large to record whole."""


@pytest.fixture(autouse=True)
def _no_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_SECRET_KEY", raising=False)
    monkeypatch.delenv("DURABLE_OLD_SECRET_KEYS", raising=False)
    monkeypatch.delenv("DURABLE_ALLOW_PICKLE", raising=False)


@pytest.fixture
def keyed() -> Any:
    """The default engine on memory, with a secret key."""
    engine = durable.configure("memory://", lease=5.0, secret_key=KEY, allow_pickle=True)
    try:
        yield engine
    finally:
        engine.close()


@workflow
def echo(value: object) -> object:
    return value


# -- signing ---------------------------------------------------------------------------


def test_pickles_are_signed_and_round_trip_with_a_key(keyed: durable.Engine) -> None:
    """With a key, a pickled input and result are stored signed (S + key id) and load back."""
    assert execute(echo, Opaque(7), id="signed") == Opaque(7)
    stored = run("signed")
    for payload in (stored.input, stored.output or b""):
        assert payload[:1] == b"S" and payload[1:9] == key_id(KEY.encode()).encode()
        assert payload[HEAD_LEN : HEAD_LEN + 1] == b"P"
    assert execute(echo, Opaque(7), id="signed") == Opaque(7), "joined: the output loads"


def test_plain_json_is_not_signed(keyed: durable.Engine) -> None:
    """Values that need no pickle stay readable ``j`` JSON, key or not."""
    assert execute(echo, {"a": [1, 2]}, id="plain") == {"a": [1, 2]}
    assert run("plain").input.startswith(b'j{"args"')
    assert keyed.dump(5, "x") == b"j5"


def test_recorded_errors_with_pickled_attributes_are_signed(keyed: durable.Engine) -> None:
    """An error carrying a pickled attribute is stored signed and replays as its own type."""
    error = Carrying("boom")
    error.thing = Opaque(3)  # type: ignore[attr-defined]
    data = keyed.dump_error(error)
    assert data[:1] == b"S"
    loaded = keyed.load_error(data, "r", 1)
    assert type(loaded) is Carrying and loaded.thing == Opaque(3)  # type: ignore[attr-defined]
    tampered = data.replace(b"boom", b"bOom")
    assert tampered != data
    with pytest.raises(PickleRefused, match="does not verify"):
        keyed.load_error(tampered, "r", 1)


def test_the_environment_supplies_the_key_and_an_option_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DURABLE_SECRET_KEY is used when no secret_key is given; an explicit one wins."""
    monkeypatch.setenv("DURABLE_SECRET_KEY", KEY)
    with durable.Engine("memory://") as from_env:
        assert from_env.signer is not None and from_env.signer.kid == key_id(KEY.encode())
    with durable.Engine("memory://", secret_key=OTHER_KEY.encode()) as explicit:
        assert explicit.signer is not None and explicit.signer.kid == key_id(OTHER_KEY.encode())
    monkeypatch.setenv("DURABLE_SECRET_KEY", "")
    with durable.Engine("memory://") as unset:
        assert unset.signer is None


def test_unsigned_pickle_is_refused_when_a_key_is_configured(
    keyed: durable.Engine, tmp_path: Path
) -> None:
    """An unsigned pickle fails with PickleRefused naming run and position; nothing runs."""
    marker = tmp_path / "pwned"
    with pytest.raises(PickleRefused) as caught:
        keyed.load(evil_payload(marker), "run-9", 4)
    error = caught.value
    assert (error.run_id, error.position, error.reason) == ("run-9", 4, "unsigned")
    message = str(error)
    assert "position 4 of run 'run-9'" in message and "not signed" in message
    assert "re-sign" in message
    assert not marker.exists()


def test_tampered_and_foreign_signatures_are_refused(keyed: durable.Engine, tmp_path: Path) -> None:
    """Signed with another key, forged under our key id, or edited: refused, never run."""
    marker = tmp_path / "pwned"
    raw = evil_payload(marker)
    foreign = Signer(OTHER_KEY.encode()).sign(raw)
    forged = b"S" + key_id(KEY.encode()).encode() + foreign[9:]
    assert keyed.signer is not None
    edited = bytearray(keyed.signer.sign(b'P{"$durable":"pickle","v":""}'))
    edited[HEAD_LEN:] = raw
    cases = {"unknown key": foreign, "bad signature": forged}
    for reason, data in cases.items():
        with pytest.raises(PickleRefused) as caught:
            keyed.load(data, "run-1", None)
        assert caught.value.reason == reason and "run 'run-1'" in str(caught.value)
    with pytest.raises(PickleRefused, match="tampered") as tampered:
        keyed.load(bytes(edited), "run-1", 2)
    assert tampered.value.reason == "bad signature"
    with pytest.raises(PickleRefused, match="malformed"):
        keyed.load(b"S1234", "run-1", 2)
    assert not marker.exists()


def test_signed_pickle_without_a_key_is_refused(keyed: durable.Engine) -> None:
    """An engine with no key does not load signed pickles it cannot verify."""
    signed = keyed.dump(Opaque(1), "x")
    with (
        durable.Engine("memory://", allow_pickle=True) as keyless,
        pytest.raises(PickleRefused) as caught,
    ):
        keyless.load(signed, "r", None)
    assert caught.value.reason == "no key" and "DURABLE_SECRET_KEY" in str(caught.value)


def test_old_keys_verify_and_resign_moves_rows_to_the_new_key(keyed: durable.Engine) -> None:
    """A retired key still verifies; resign re-signs old and unsigned rows, never forged."""
    old_signed = keyed.dump(Opaque(2), "x")
    unsigned = dumps(Opaque(2), allow_pickle=True, where="x")
    with durable.Engine(
        "memory://", secret_key=OTHER_KEY, old_secret_keys=[KEY], allow_pickle=True
    ) as rotated:
        assert rotated.load(old_signed, "r", None) == Opaque(2)
        fresh = rotated.resign(old_signed)
        assert fresh[1:9] == key_id(OTHER_KEY.encode()).encode()
        assert rotated.resign(unsigned)[1:9] == fresh[1:9]
        assert rotated.resign(b"j[1]") == b"j[1]"
        with pytest.raises(PickleRefused):
            rotated.resign(old_signed[:-2] + b"]}")
    with durable.Engine("memory://", secret_key=OTHER_KEY, allow_pickle=True) as new_only:
        assert new_only.load(fresh, "r", None) == Opaque(2)
        with pytest.raises(PickleRefused, match="key id"):
            new_only.load(old_signed, "r", None)


def test_bad_key_options_are_configuration_errors() -> None:
    """Short keys, old keys without a current one, and wrong types are refused at once."""
    bad: list[dict[str, Any]] = [
        {"secret_key": "short"},
        {"secret_key": 12345678901234567890},
        {"old_secret_keys": [KEY]},
        {"secret_key": KEY, "old_secret_keys": KEY},
        {"secret_key": KEY, "old_secret_keys": ["tiny"]},
        {"max_payload": 0},
    ]
    for options in bad:
        with pytest.raises(ConfigurationError):
            durable.Engine("memory://", **options)
    with pytest.raises(ConfigurationError, match="resign needs a secret key"):
        durable.Engine("memory://").resign(b"P1")


def test_reprs_do_not_show_the_key(keyed: durable.Engine) -> None:
    """Neither the signer's nor the engine's repr holds the key."""
    assert keyed.signer is not None
    assert KEY not in repr(keyed.signer) and KEY not in repr(keyed)
    assert key_id(KEY.encode()) in repr(keyed.signer)


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


# -- size limit ------------------------------------------------------------------------------


@pytest.fixture
def small() -> Any:
    """The default engine on memory, with a 4 KiB payload limit."""
    engine = durable.configure("memory://", lease=5.0, max_payload=4096)
    try:
        yield engine
    finally:
        engine.close()


def test_too_large_arguments_raise_before_anything_is_stored(small: durable.Engine) -> None:
    """execute and dispatch refuse arguments over max_payload, naming the argument."""
    with pytest.raises(PayloadTooLarge) as caught:
        execute(echo, "x" * 5000, id="big")
    error = caught.value
    assert isinstance(error, SerializationError)
    assert (error.size, error.limit) == (5003, 4096)
    message = str(error)
    assert "argument 'value' of workflow" in message and "5,003 bytes" in message
    assert "4,096" in message and "reference" in message and "max_payload" in message
    with pytest.raises(PayloadTooLarge):
        durable.dispatch(echo, ["y" * 100] * 50, id="big2")
    assert small.backend.get_run("big") is None and small.backend.get_run("big2") is None


def test_too_large_task_result_fails_that_task_without_retries(small: durable.Engine) -> None:
    """A task result over the limit is recorded as PayloadTooLarge at once, never retried."""
    bodies: list[int] = []

    @task(retry={"attempts": 3, "initial": 0})
    def produce() -> str:
        bodies.append(1)
        return "z" * 10_000

    @workflow
    def flow() -> str:
        try:
            produce()
        except PayloadTooLarge as error:
            return f"too large: {error.size}"
        return "stored?"

    assert execute(flow, id="big-result") == "too large: 10003"
    (step,) = history("big-result")
    assert step.status is StepStatus.FAILED and step.attempts == 1
    assert bodies == [1]
    assert execute(flow, id="big-result") == "too large: 10003", "replayed, not re-run"
    assert bodies == [1]


def test_too_large_workflow_result_fails_the_run(small: durable.Engine) -> None:
    """A workflow result over the limit fails the run, naming the result."""
    with pytest.raises(PayloadTooLarge, match="result of run 'big-out'"):
        execute(_grow, 10_000, id="big-out")
    assert run("big-out").status is RunStatus.FAILED


@workflow
def _grow(n: int) -> str:
    return "w" * n


def test_too_large_event_payload_is_refused_before_sending(small: durable.Engine) -> None:
    """send() with a payload over the limit raises and stores no event."""
    handle = durable.dispatch(_grow, 1, id="target")
    with pytest.raises(PayloadTooLarge, match="payload of event 'go'"):
        durable.send(handle, "go", "e" * 5000)
    assert list(small.backend.events("target")) == []


def test_a_huge_error_is_cut_down_not_lost(small: durable.Engine) -> None:
    """An error too large to store is recorded with its type and a cut message."""
    error = Huge("m" * 50_000)
    error.blob = "b" * 50_000  # type: ignore[attr-defined]
    data = small.dump_error(error)
    assert len(data) < 30_000
    loaded = small.load_error(data, "r", None)
    assert type(loaded) is Huge and "over the payload limit" in str(loaded)
    assert not hasattr(loaded, "blob")


def test_default_limit_is_64_mib() -> None:
    """The default max_payload is 64 MiB."""
    with durable.Engine("memory://") as engine:
        assert engine.max_payload == 64 * 1024 * 1024


# -- passwords -------------------------------------------------------------------------------

PASSWORD = "s3cret-pw"
UNREACHABLE = f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/test"


def test_unreachable_database_leaks_no_password(caplog: pytest.LogCaptureFixture) -> None:
    """Errors and DEBUG logs of a failed connection hold the masked URL, never the password."""
    with caplog.at_level(logging.DEBUG):
        for attempt in (durable.Engine, durable.configure):
            with pytest.raises(StorageError) as caught:
                attempt(UNREACHABLE)
            assert PASSWORD not in str(caught.value) and PASSWORD not in repr(caught.value)
            assert "postgres:***@127.0.0.1:1" in str(caught.value)
    for record in caplog.records:
        assert PASSWORD not in record.getMessage()


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://postgres:{PASSWORD}/test",  # no host: the password reads as a port
        f"postgresql://postgres:{PASSWORD}@127.0.0.1:x/test",
        f"mysql://root:{PASSWORD}@localhost/db",
        f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/test?bogus=1",
    ],
)
def test_malformed_urls_leak_no_password(url: str) -> None:
    """A URL that does not parse or is refused is reported without its password."""
    with pytest.raises((ConfigurationError, StorageError)) as caught:
        durable.Engine(url)
    assert PASSWORD not in str(caught.value)
