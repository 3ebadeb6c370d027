"""Reaping the wrappers this process launched, so none lingers as a zombie.

A process that ends stays a zombie until its parent collects its status. A library
may not take SIGCHLD or call ``waitpid(-1)`` (both steal the statuses of its host
program's own children), and a thread per launch costs the engine most of a
millisecond to start. So one daemon thread, started with the first launch, polls the
launched processes it holds and lets go of each once it has ended: a finished
wrapper stays a zombie for at most `INTERVAL`. If this process dies first, its
wrappers are reparented and reaped by the system.
"""

from __future__ import annotations

import os
import subprocess
import threading

#: How often the reaper looks at the processes it holds, in seconds.
INTERVAL = 0.05

_lock = threading.Condition()
_held: list[subprocess.Popen[bytes]] = []
_thread: threading.Thread | None = None


def reap(process: subprocess.Popen[bytes]) -> None:
    """Collect *process*'s exit status once it ends, from the shared reaper thread."""
    global _thread
    with _lock:
        _held.append(process)
        if _thread is None:
            _thread = threading.Thread(target=_run, name="durable-reaper", daemon=True)
            _thread.start()
        _lock.notify()


def _run() -> None:
    """Poll the held processes, dropping each that has ended (``poll`` reaps it);
    sleep on the condition while none is held."""
    with _lock:
        while True:
            _held[:] = [process for process in _held if process.poll() is None]
            _lock.wait(INTERVAL if _held else None)


def _forget() -> None:
    """In a forked child: the reaper thread did not come along, and the processes held
    are its parent's children, not its own."""
    global _lock, _thread
    _lock = threading.Condition()
    _held.clear()
    _thread = None


os.register_at_fork(after_in_child=_forget)
