"""HMAC signatures on payloads that hold pickles: only the key's holders make workers run code.

Loading a pickle runs code, so whoever can write the database could otherwise run code
in every worker. With a secret key, every payload that holds a pickle is written as::

    S <key id: 8 hex digits> <tag: 64 hex digits> <the payload: P + JSON>

The tag is HMAC-SHA256 under the key, over a domain prefix and the whole inner payload,
header byte included. A reader looks the key up by its id (the current key or a
retired one kept for reading) and unpickles nothing unless the tag verifies. The key id
is a one-way function of the key: it names the key in errors without revealing it.

Everything stays text, so a signed row is as readable in the dashboard as any other.
Plain JSON payloads (``j``) are not signed: loading them never runs code.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping, Sequence

from durable.errors import ConfigurationError

SIGNED = b"S"
_DOMAIN = b"durable payload v1\n"
_KID_LEN = 8
_TAG_LEN = 64
#: Bytes before the inner payload: the header, the key id and the tag.
HEAD_LEN = 1 + _KID_LEN + _TAG_LEN
#: Keys shorter than this are refused: they can be guessed.
MIN_KEY_BYTES = 16

KEY_ENV = "DURABLE_SECRET_KEY"
OLD_KEYS_ENV = "DURABLE_OLD_SECRET_KEYS"


class BadSignature(Exception):
    """A signed payload that does not verify; `reason` is a short code for the caller."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def key_id(key: bytes) -> str:
    """The public name of *key*: 8 hex digits that do not reveal it."""
    return hmac.new(key, b"durable key id", hashlib.sha256).hexdigest()[:_KID_LEN]


class Signer:
    """Signs payloads with the current key and verifies them with any configured key.

    Args:
        key: the current key; new payloads are signed with it.
        old: retired keys, accepted for reading only (key rotation).
    """

    __slots__ = ("_key", "_keys", "kid")

    def __init__(self, key: bytes, old: Sequence[bytes] = ()) -> None:
        self._key = key
        self.kid = key_id(key)
        self._keys: dict[str, bytes] = {}
        for each in (key, *old):
            self._keys.setdefault(key_id(each), each)

    def __repr__(self) -> str:
        # Never the key itself: reprs end up in logs.
        return f"Signer(key id {self.kid}, {len(self._keys) - 1} old key(s))"

    def sign(self, payload: bytes) -> bytes:
        """*payload* with a signature header in front."""
        return SIGNED + self.kid.encode("ascii") + _tag(self._key, payload) + payload

    def open(self, data: bytes) -> bytes:
        """The inner payload of a signed *data*, once its signature verifies.

        Raises:
            BadSignature: the header is malformed, names a key this signer lacks, or the
                tag does not match (the row was changed after it was signed).
        """
        head = bytes(data[:HEAD_LEN])
        kid = head[1 : 1 + _KID_LEN].decode("ascii", "replace")
        tag = head[1 + _KID_LEN :]
        if len(head) < HEAD_LEN or not _is_hex(kid) or not _is_hex(tag.decode("ascii", "replace")):
            raise BadSignature(
                "bad signature",
                "has a malformed signature header (the row is truncated, corrupt or was "
                "tampered with)",
            )
        key = self._keys.get(kid)
        if key is None:
            raise BadSignature(
                "unknown key",
                f"is signed with key id {kid}, which is not one of this engine's keys "
                f"(current key id {self.kid}): configure the key that wrote it (secret_key, or "
                "old_secret_keys for a retired key); if no such key exists, the row was forged",
            )
        payload = bytes(data[HEAD_LEN:])
        if not hmac.compare_digest(_tag(key, payload), tag):
            raise BadSignature(
                "bad signature",
                f"has a signature that does not verify under key id {kid}: the row was changed "
                "after it was written (tampered with or truncated)",
            )
        return payload


def _tag(key: bytes, payload: bytes) -> bytes:
    mac = hmac.new(key, _DOMAIN, hashlib.sha256)
    mac.update(payload)
    return mac.hexdigest().encode("ascii")


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def _key_bytes(value: object, what: str) -> bytes:
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, bytes | bytearray):
        raise ConfigurationError(f"{what} must be str or bytes, got {type(value).__name__}.")
    if len(value) < MIN_KEY_BYTES:
        raise ConfigurationError(
            f"{what} is {len(value)} bytes; a secret key needs at least {MIN_KEY_BYTES} "
            "(make one with: python -c 'import secrets; print(secrets.token_hex(32))')."
        )
    return bytes(value)


def signer_from(
    secret_key: str | bytes | None,
    old_secret_keys: Sequence[str | bytes] | None,
    environ: Mapping[str, str] = os.environ,
) -> Signer | None:
    """The signer the options ask for, or None when no key is configured.

    An explicit option wins over its environment variable (``DURABLE_SECRET_KEY``, and
    ``DURABLE_OLD_SECRET_KEYS``, comma-separated). An empty variable counts as unset.
    """
    key: str | bytes | None = secret_key
    if key is None:
        key = environ.get(KEY_ENV) or None
    old: Sequence[str | bytes] | None = old_secret_keys
    if old is None:
        old = [k.strip() for k in environ.get(OLD_KEYS_ENV, "").split(",") if k.strip()]
    elif isinstance(old, str | bytes):
        raise ConfigurationError("old_secret_keys must be a list of keys, not one key.")
    if key is None:
        if old:
            raise ConfigurationError(
                "old_secret_keys (or $DURABLE_OLD_SECRET_KEYS) is set without a current key: "
                "set secret_key (or $DURABLE_SECRET_KEY) too."
            )
        return None
    source = "secret_key" if secret_key is not None else f"${KEY_ENV}"
    return Signer(
        _key_bytes(key, source),
        [_key_bytes(k, f"old secret key #{i + 1}") for i, k in enumerate(old)],
    )
