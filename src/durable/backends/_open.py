"""Opening a backend from a database URL."""

from __future__ import annotations

from durable.core.clock import SYSTEM_CLOCK, Clock
from durable.errors import ConfigurationError, StorageError

from ._protocol import Backend
from .memory import MemoryBackend

#: Where runs live when nothing else is configured: a file in the working directory.
DEFAULT_URL = "sqlite:///durable.db"


def open_backend(url: str, *, clock: Clock = SYSTEM_CLOCK) -> Backend:
    """Return the backend for *url*: ``memory://``, ``sqlite:///...`` or ``postgresql://...``.

    Raises:
        ConfigurationError: the URL cannot be parsed or names no supported database.
        StorageError: the database cannot be opened.
    """
    if url.startswith("memory:"):
        return MemoryBackend(clock=clock)
    from .sql import SQLBackend

    try:
        return SQLBackend(url)
    except (ConfigurationError, StorageError):
        raise
    except Exception as error:
        # Not the parser's message: it can quote the password (a URL without a host
        # reads the password as the port).
        scheme = url.split("://", 1)[0] if "://" in url else "?"
        scheme = scheme if scheme.replace("+", "").isalnum() else "?"
        raise ConfigurationError(
            f"Cannot parse the database URL ({scheme}://..., {type(error).__name__}). Use "
            "sqlite:///path/to/file.db, postgresql://user:password@host:port/database or "
            "memory://, with special characters in the password percent-encoded."
        ) from None
