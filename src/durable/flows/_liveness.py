"""Whether a process we launched earlier still lives, told from its pid and start time.

A pid alone is not an identity: after the process ends the kernel hands the number to
the next process, and after a reboot every number starts over. Seed 001's state design
names a process by its pid *and* its start time; on Linux that is field 22 of
``/proc/<pid>/stat`` (clock ticks after boot), and the machine's boot id
(``/proc/sys/kernel/random/boot_id``) tells a reboot apart. Where there is no ``/proc``
only the pid can be checked (``os.kill(pid, 0)``).
"""

from __future__ import annotations

import functools
import os
import select
import socket
import time

#: What a pid file holds for the start time where there is no /proc to read it from.
UNKNOWN_START = "-"
_PROC = "/proc"


def proc_start(pid: int) -> str | None:
    """The start time of process *pid* as the kernel reports it (field 22 of
    ``/proc/<pid>/stat``, clock ticks after boot), or None: no such process, or no
    ``/proc`` on this system.
    """
    fields = _stat_fields(pid)
    return None if fields is None else fields[19]


def alive(pid: int, start: str | int) -> bool:
    """Whether process *pid* is the one that started at *start* and has not ended.

    On Linux the start time in ``/proc/<pid>/stat`` must equal *start*, so a recycled
    pid is not mistaken for ours, and a zombie (ended, not yet reaped by its parent)
    counts as ended. Elsewhere, or when *start* is `UNKNOWN_START`, only the pid is
    checked, with ``os.kill(pid, 0)``.

    Args:
        pid: the process id.
        start: its start time as `proc_start` gave it when it was launched.
    """
    if pid <= 0:
        return False  # os.kill(0 or -n, 0) would ask about whole process groups
    if os.path.isdir(_PROC) and str(start) != UNKNOWN_START:
        fields = _stat_fields(pid)
        return fields is not None and fields[0] not in ("Z", "X") and fields[19] == str(start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


@functools.cache
def boot_id() -> str | None:
    """This boot of this machine (Linux), or None where the kernel does not say.

    A boot id never changes while a process lives, so it is read once.
    """
    try:
        with open(f"{_PROC}/sys/kernel/random/boot_id", encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return None


@functools.cache
def this_host() -> str:
    """This machine's host name, as recorded with each launch."""
    return socket.gethostname()


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (field 3 first), or
    None when there is no such process.

    The command name (field 2) is in parentheses and may itself hold spaces and
    parentheses, so the line is split after its last ``)``.
    """
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as file:
            line = file.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return line.rpartition(b")")[2].decode("ascii").split()


class ExitWatch:
    """Sleeps until process *pid* ends or a timeout passes, whichever comes first: on
    Linux a pidfd wakes the sleeper the moment the process ends (ours or not), so a
    command's end is seen at once without polling fast; elsewhere it simply sleeps.
    Only a hint to look again: whether the launch ended is read from its files."""

    def __init__(self, pid: int | None) -> None:
        self._fd: int | None = None
        opener = getattr(os, "pidfd_open", None)
        if pid is not None and opener is not None:
            try:
                self._fd = opener(pid)
            except OSError:  # gone already, or not allowed: plain sleeps
                self._fd = None

    @property
    def exact(self) -> bool:
        """Whether the end wakes the sleeper (else only the timeout does)."""
        return self._fd is not None

    def wait(self, timeout: float) -> bool:
        """Sleep up to *timeout* seconds; True if the process has ended."""
        if self._fd is None:
            time.sleep(timeout)
            return False
        ready, _, _ = select.select([self._fd], [], [], timeout)
        return bool(ready)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
