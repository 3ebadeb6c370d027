"""Who owns a run: lease-owner strings, and telling a dead owner from a live one.

An owner is ``place:pid:start:nonce``. The *place* is where the pid means something:
``host@boot-id.pid-namespace`` (the kernel's boot id and the inode of the process's
PID namespace), so two containers that share a host name, or VMs cloned with the same
name, are different places. ``start`` is the process start time from /proc (so a
recycled pid is not mistaken for the old process) and ``nonce`` tells engines inside
one process apart.

Only for an owner in our own place do we check whether the owning process still lives,
and take its runs over at once; every other owner is judged by its lease alone. So are
owners whose place is ``host@unknown`` (no boot id, no /proc of our own namespace: not
Linux, or /proc mounted for another namespace) and owners in the old ``host:pid:...``
form that durable wrote before places existed.
"""

from __future__ import annotations

import os
import secrets
import socket
from functools import cache

#: The kernel's random id of the current boot (Linux).
BOOT_ID = "/proc/sys/kernel/random/boot_id"
#: The place of a process whose boot or PID namespace cannot be told for sure.
UNKNOWN = "unknown"


@cache
def host() -> str:
    """This machine's name as it appears in owner strings (without ``:`` or ``@``)."""
    return socket.gethostname().replace(":", "_").replace("@", "_")


@cache
def _boot_id() -> str | None:
    try:
        with open(BOOT_ID, encoding="ascii") as f:
            boot = f.read().strip()
    except (OSError, ValueError):
        return None
    return boot if boot and all(c.isalnum() or c == "-" for c in boot) else None


@cache
def _place(pid: int) -> str:
    """The place of process *pid* (this process: a forked child may be elsewhere)."""
    boot = _boot_id()
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
        # /proc must be the one of our own PID namespace, or the pids it lists are not
        # ours: `unshare --pid` without a new /proc, a container sharing the host's.
        ours = os.readlink("/proc/self") == str(pid)
    except OSError:
        return f"{host()}@{UNKNOWN}"
    if boot is None or not ours:
        return f"{host()}@{UNKNOWN}"
    return f"{host()}@{boot}.{namespace}"


def place() -> str:
    """Where this process's pids mean something: ``host@boot-id.pid-namespace``, or
    ``host@unknown`` if that cannot be told."""
    return _place(os.getpid())


def judges_here() -> bool:
    """Whether this process can tell from /proc that an owner in its place has died."""
    return not place().endswith(f"@{UNKNOWN}")


def forget() -> None:
    """Forget the cached host name, boot id and place (for tests)."""
    host.cache_clear()
    _boot_id.cache_clear()
    _place.cache_clear()


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
    pid = os.getpid()
    return f"{place()}:{pid}:{_start_time(pid)}:{secrets.token_hex(4)}"


def is_dead(owner: str | None) -> bool:
    """True when *owner* is a process in this place (host, boot, PID namespace) that no
    longer runs.

    False when it lives, lives elsewhere, cannot be judged from here, or cannot be
    parsed: only its lease can tell then.
    """
    if not owner:
        return False
    parts = owner.rsplit(":", 3)
    if len(parts) != 4 or parts[0] != place() or not judges_here() or not parts[1].isdigit():
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
    # No /proc entry, yet the pid exists: assume it is the owner.
    return False
