"""Who owns a run: lease-owner strings, and telling a dead owner from a live one.

An owner is ``host:pid:start:nonce``. ``start`` is the process start time from
/proc (so a recycled pid is not mistaken for the old process) and ``nonce`` tells
engines inside one process apart. On the same host we can check whether the owning
process still lives and take its runs over at once; for other hosts only the lease
expiry says so.
"""

from __future__ import annotations

import os
import secrets
import socket
from functools import cache


@cache
def host() -> str:
    """This machine's name as it appears in owner strings."""
    return socket.gethostname().replace(":", "_")


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """Return (state, start time) of *pid* from /proc, or None if there is no such entry."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses; fields after the
    # last ')' are fixed: state is field 3, start time field 22.
    fields = stat.rpartition(")")[2].split()
    return fields[0], fields[19]


def _start_time(pid: int) -> str:
    stat = _proc_stat(pid)
    return stat[1] if stat else "0"


def new_owner() -> str:
    """Return a fresh owner string for an engine in this process."""
    return f"{host()}:{os.getpid()}:{_start_time(os.getpid())}:{secrets.token_hex(4)}"


def is_dead(owner: str | None) -> bool:
    """True when *owner* is a process on this host that no longer runs.

    False when it lives, runs elsewhere (only its lease can tell), or cannot be parsed.
    """
    if not owner:
        return False
    parts = owner.rsplit(":", 3)
    if len(parts) != 4 or parts[0] != host() or not parts[1].isdigit():
        return False
    pid, start = int(parts[1]), parts[2]
    if pid == os.getpid():
        return start != _start_time(pid)
    stat = _proc_stat(pid)
    if stat is not None:
        state, started = stat
        # A zombie has exited and only waits to be reaped; a different start time is
        # another process that got the same pid.
        return state in ("Z", "X") or start not in ("0", started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    # No /proc here but the pid exists: assume it is the owner.
    return False
