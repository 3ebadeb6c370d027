"""Security: no passwords in errors or logs of a database that cannot be reached or
a URL that does not parse."""

from __future__ import annotations

import logging

import pytest

import durable
from durable.errors import ConfigurationError, StorageError
from tests.unit._security_helpers import (
    _no_key_from_the_environment,  # noqa: F401 (autouse fixture)
)

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
