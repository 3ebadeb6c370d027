"""Relaxed commits on SQLite: a run's outcome, or its creation for its owner, without
an fsync of its own.

A run's outcome (completed, failed, cancelled) follows from its history: replaying the
recorded steps returns the same result or raises the same error without running any
task again. So at ``synchronous=FULL`` or ``EXTRA`` the transaction that finishes a run
commits at ``NORMAL``: it is in the WAL, which a process crash keeps, and becomes
durable against power loss with the next synced commit of any connection to the file
(the WAL is one file written in order, and its fsync covers every earlier frame), or
at most `DELAY` seconds later, when a background thread fsyncs the WAL. A power loss
in between leaves the run RUNNING under an owner that is gone; recovery replays it to
the same outcome. A run that `execute` creates for its own process is relaxed too: it
has done nothing yet, and its first effect (a task's start, a send, a dispatch, a wait)
is a synced commit that makes it durable. A dispatched run is synced (its handle goes to
the caller), and so is an outcome that carries the last task's result (not implied by
the history). A workflow of N tasks costs N + 1 fsyncs: the first task's start, N - 1
results each with the next task's start, and the last result with the outcome.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

#: Seconds a relaxed commit waits, at most, for a synced one before the WAL is fsynced.
DELAY = 0.1


class RelaxedCommits:
    """Switches SQLite connections to ``NORMAL`` for one transaction, and makes those
    commits durable within `DELAY` seconds.

    Args:
        database: the SQLite file (its WAL is beside it, ``<database>-wal``).
        synchronous: the level connections normally run at (``FULL`` or ``EXTRA``).
    """

    def __init__(self, database: Path, synchronous: str, *, delay: float | None = None) -> None:
        self._restore = f"PRAGMA synchronous={synchronous}"
        self._wal = f"{database}-wal"
        self._delay = DELAY if delay is None else delay
        self._due = threading.Condition()
        self._pending = False
        self._closed = False
        self._thread: threading.Thread | None = None
        #: how many fsyncs the background thread made (for tests).
        self.flushes = 0

    @contextlib.contextmanager
    def relaxed(self, execute: Callable[[str], object]) -> Iterator[None]:
        """Run the transaction inside at ``NORMAL`` on the connection behind *execute*;
        once it has committed, promise its fsync (`committed`)."""
        execute("PRAGMA synchronous=NORMAL")
        try:
            yield
        finally:
            execute(self._restore)
        self.committed()

    def committed(self) -> None:
        """A relaxed transaction committed: fsync the WAL within `DELAY` seconds."""
        with self._due:
            if self._pending or self._closed:
                return
            self._pending = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="durable-wal-fsync", daemon=True
                )
                self._thread.start()
            else:
                self._due.notify()

    def forget(self) -> None:
        """In a forked child: no thread, and a fresh lock (the parent's thread may have
        held the old one at the fork). The parent fsyncs its own commits."""
        self._due = threading.Condition()
        self._pending = False
        self._thread = None

    def _run(self) -> None:
        while self._next():
            self._fsync()

    def _next(self) -> bool:
        """Wait for a relaxed commit, then `DELAY`; False once closed (close() cuts the
        delay short, and fsyncs itself)."""
        with self._due:
            self._due.wait_for(lambda: self._pending or self._closed)
            self._due.wait_for(lambda: self._closed, self._delay)
            self._pending = False
            return not self._closed

    def _fsync(self) -> None:
        # A WAL that is gone was checkpointed into the (synced) database and deleted by
        # the last connection to close; anything else is reported by the next commit.
        with contextlib.suppress(OSError):
            fd = os.open(self._wal, os.O_RDONLY)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
            self.flushes += 1

    def close(self) -> None:
        """Stop the thread; fsync now whatever relaxed commit still waits for one."""
        with self._due:
            pending, self._pending, self._closed = self._pending, False, True
            self._due.notify()
        if pending:
            self._fsync()
