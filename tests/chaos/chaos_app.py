"""What `durable worker` subprocesses of the chaos tests run.

It registers the end-to-end workflows (tests/e2e/workers_app.py: ``storm`` and its
ledger) and adds a timed sleeper. Environment:

    DURABLE_CHAOS_LISTEN=once   this worker's LISTEN connection never comes back after
                                it first drops: it must live on polling alone.
    FAKETIME_TIMESTAMP_FILE     set (with libfaketime preloaded) by the clock tests:
                                ``time.sleep`` then waits on a condition instead, as
                                libfaketime 0.9.10 fails Python's ``time.sleep`` with
                                EINVAL (absolute clock_nanosleep) when it leaves the
                                monotonic clock alone.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import durable
from durable import task, workflow
from durable.backends import _listener
from tests.e2e import workers_app

__all__ = ["stopwatch", "timed_nap", "workers_app"]


@task
def stopwatch() -> float:
    """This host's monotonic time: one clock for every process, and libfaketime leaves
    it alone (FAKETIME_DONT_FAKE_MONOTONIC=1), so it measures real time."""
    return time.monotonic()


@workflow
def timed_nap(seconds: float) -> list[float]:
    """Sleep durably between two recorded readings of the real clock."""
    before = stopwatch()
    durable.wait(seconds)
    return [before, stopwatch()]


def _listen_only_once() -> None:
    """Make the LISTEN thread's first connection its last (see the module docstring)."""
    original = _listener.Listener.__init__

    def patched(self: _listener.Listener, open_: Callable[[], Any], *args: Any) -> None:
        opened: list[bool] = []

        def open_once() -> Any:
            if opened:
                raise ConnectionError("LISTEN is blocked by the chaos test")
            opened.append(True)
            return open_()

        original(self, open_once, *args)

    _listener.Listener.__init__ = patched  # type: ignore[method-assign,assignment]


def _sleep_without_clock_nanosleep() -> None:
    """Replace ``time.sleep`` by a condition wait (see the module docstring)."""

    def sleep(seconds: float) -> None:
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        threading.Event().wait(seconds)

    time.sleep = sleep  # type: ignore[assignment]


if os.environ.get("DURABLE_CHAOS_LISTEN") == "once":
    _listen_only_once()
if os.environ.get("FAKETIME_TIMESTAMP_FILE"):
    _sleep_without_clock_nanosleep()
