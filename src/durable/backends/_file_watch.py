"""Following a SQLite file's path when the file under it is replaced or deleted.

A SQLite connection holds the file it opened (its inode), not the path. A backup
restored by renaming it over the database, or a database deleted and created again
(by the next `dispatch`), leaves every pooled connection on the old file: a worker
would go on serving a file nobody else sees, and never claim the runs dispatched to
the new one. So the backend remembers which file it opened (device and inode) and,
at most once every `CHECK_EVERY` seconds, on its next use, checks the path with one
``stat``. If the path names another file, or none, it logs a warning, drops its
connections and opens the path again (creating the file and its tables if it is gone).

Writing into a file that another process has open is unsafe for SQLite whatever
durable does; the warning says how to restore a database safely.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

#: Seconds between two looks at the path (each one ``stat``).
CHECK_EVERY = 1.0

_ADVICE = (
    "Stop every worker before replacing or deleting a SQLite database, and remove its "
    "-wal and -shm files with it; or restore into the live file with the sqlite3 "
    "backup API (sqlite3 FILE '.restore BACKUP')."
)


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at *path*; None if there is none.

    Raises:
        OSError: the path cannot be examined (permissions...): nothing can be said.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class FileWatch:
    """Tells when the path of an open SQLite database names another file than the one
    that was opened.

    Args:
        path: the database file, as connections open it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._opened: tuple[int, int] | None = None
        self._known = False  # whether _opened says anything (a stat may fail)
        self._busy = False  # reported, and not yet opened again
        self._next = 0.0
        self._lock = threading.Lock()

    def opened(self) -> None:
        """The path has just been opened: remember the file it names now."""
        with self._lock:
            try:
                self._opened, self._known = _identity(self.path), True
            except OSError:
                self._opened, self._known = None, False
            self._busy = False
            self._next = time.monotonic() + CHECK_EVERY

    def retry(self) -> None:
        """Opening the path again failed: report it again at the next look."""
        with self._lock:
            self._busy = False

    def moved(self) -> str | None:
        """What happened to the file, if the path no longer names the one opened; None
        if it still does, if that cannot be told, or if it was checked less than
        `CHECK_EVERY` seconds ago. One caller at a time gets the news."""
        now = time.monotonic()
        if now < self._next or self._busy or not self._known:
            return None
        if not self._lock.acquire(blocking=False):
            return None  # another thread is looking
        try:
            if now < self._next or self._busy:
                return None
            self._next = now + CHECK_EVERY
            try:
                current = _identity(self.path)
            except OSError:
                return None
            opened = self._opened
            if current == opened:
                return None
            self._busy = True  # until `opened` (or `retry`): the caller opens it again
        finally:
            self._lock.release()
        path = self.path.absolute()
        if current is None:
            return (
                f"The SQLite database {path} was deleted while this process had it open "
                "(runs written since went to the deleted file); opening it again, as a new "
                f"database. {_ADVICE}"
            )
        return (
            f"The SQLite database {path} was replaced by another file (inode "
            f"{opened[1] if opened else '?'} -> "
            f"{current[1]}) while this process had it open; closing the connections to the "
            f"old file and serving the new one. {_ADVICE}"
        )
