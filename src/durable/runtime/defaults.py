"""The process-wide default engine, configured once or taken from the environment.

`durable.execute`, `dispatch`, `recover` and `Worker()` use it; so does the clock of
task bodies (`durable.now()` outside a workflow in a `DurableEnv` is virtual time).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from durable.backends import DEFAULT_URL
from durable.core.clock import SYSTEM_CLOCK, Clock

from .engine import Engine

_lock = threading.Lock()
_default: Engine | None = None


def configure(url: str | None = None, **options: Any) -> Engine:
    """Set the database (and options) that `execute`, `recover` and friends use.

    Args:
        url: ``sqlite:///path.db``, ``postgresql://user:pw@host/db`` or ``memory://``.
            Defaults to ``$DURABLE_DATABASE_URL``, else ``sqlite:///durable.db``.
        **options: passed to `Engine` (``lease``, ``allow_pickle``, ``secret_key``,
            ``max_payload``, ``max_threads``, ``version``...). ``secret_key`` defaults to
            ``$DURABLE_SECRET_KEY``: with a key, pickled payloads are signed and only
            signed ones are loaded. ``version`` (the code version the runs this process
            creates and first starts are stamped with) defaults to ``$DURABLE_VERSION``.

    Returns:
        The new default engine. The previous one, if any, is closed.
    """
    global _default
    engine = Engine(url or os.environ.get("DURABLE_DATABASE_URL") or DEFAULT_URL, **options)
    with _lock:
        previous, _default = _default, engine
    if previous is not None:
        previous.close()
    return engine


def get_engine() -> Engine:
    """Return the default engine, creating it from the environment on first use."""
    global _default
    engine = _default
    if engine is not None:
        return engine
    with _lock:
        if _default is None:
            _default = Engine(os.environ.get("DURABLE_DATABASE_URL") or DEFAULT_URL)
        return _default


def configured_clock() -> Clock:
    """The default engine's clock if one is configured (a test's virtual clock), else
    the system clock. Never creates an engine."""
    engine = _default
    return engine.clock if engine is not None else SYSTEM_CLOCK


def swap(engine: Engine | None) -> Engine | None:
    """Make *engine* the default engine (None: unset); return the previous one.

    For `durable.testing.DurableEnv`, which installs its engine for the duration of a
    test and puts the previous one back; nothing is closed here.
    """
    global _default
    with _lock:
        previous, _default = _default, engine
    return previous
