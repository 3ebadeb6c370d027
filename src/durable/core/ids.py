"""Generated run ids: UUIDv7 (RFC 9562), written as 32 hex digits.

A run created without an id gets one of these. The first 48 bits are the Unix time in
milliseconds, so ids sort by creation time: a new run's row, and its history rows keyed
by ``(run_id, position)``, go to the right-hand end of their B-tree indexes instead of a
random page. That keeps the pages a commit writes few and hot (random UUIDv4 ids made
each SQLite commit of a short workflow write about a third more pages), and keeps
PostgreSQL's indexes compact. The other 74 bits are random, so ids made in the same
millisecond, by any number of processes, still differ.
"""

from __future__ import annotations

import os
import time

_VERSION = 0x7 << 76  # the 4 version bits follow the 48-bit timestamp
_VARIANT = 0x2 << 62  # RFC 9562 variant: binary 10
_RANDOM = (1 << 80) - 1 & ~(0xF << 76) & ~(0x3 << 62)


def new_run_id() -> str:
    """A fresh run id: a UUIDv7 as 32 lowercase hex digits, ordered by creation time."""
    millis = time.time_ns() // 1_000_000 & (1 << 48) - 1
    random = int.from_bytes(os.urandom(10)) & _RANDOM
    return f"{millis << 80 | _VERSION | _VARIANT | random:032x}"
