"""How the live hub notices a SQLite commit without a statement (`_live._stamp`): a
commit that leaves the WAL's size and time as they were still changes the stamp."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from durable.web import _live


def test_a_commit_that_rewrites_the_wal_in_place_changes_the_stamp(tmp_path: Path) -> None:
    """After a checkpoint the WAL restarts: the next commit rewrites its first frames,
    so its size stays; with a coarse file clock its time may stay too (set back here, as
    a clock that had not ticked would leave it). The WAL index's header still moves."""
    database = tmp_path / "live.db"
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("CREATE TABLE t (n INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("PRAGMA wal_checkpoint(RESTART)")
        files = _live._sqlite_files(
            type("B", (), {"dialect_name": "sqlite", "url": _Url(database)})
        )
        wal = files[1]
        before = _live._stamp(files)
        size, times = wal.stat().st_size, (wal.stat().st_atime_ns, wal.stat().st_mtime_ns)
        conn.execute("INSERT INTO t VALUES (2)")
        os.utime(wal, ns=times)
        assert wal.stat().st_size == size, "the WAL grew: the case is not the one meant"
        after = _live._stamp(files)
        assert after[:2] == before[:2], "the files' stats moved: the case is not the one meant"
        assert after != before
    finally:
        conn.close()


class _Url:
    def __init__(self, database: Path) -> None:
        self.database = str(database)
