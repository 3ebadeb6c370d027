"""Security: signed pickles. With a secret key pickles are stored signed, and an
unsigned, foreign, forged or edited one is refused without running it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import durable
from durable import execute
from durable.core.serde import dumps
from durable.core.signing import HEAD_LEN, Signer, key_id
from durable.errors import ConfigurationError, PickleRefused
from tests.unit._security_helpers import (
    KEY,
    OTHER_KEY,
    Opaque,
    _no_key_from_the_environment,  # noqa: F401 (autouse fixture)
    echo,
    evil_payload,
)
from tests.unit.helpers import run


class Carrying(Exception):
    """An error that carries an attribute only a pickle can store."""


@pytest.fixture
def keyed() -> Any:
    """The default engine on memory, with a secret key."""
    engine = durable.configure("memory://", lease=5.0, secret_key=KEY, allow_pickle=True)
    try:
        yield engine
    finally:
        engine.close()


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
