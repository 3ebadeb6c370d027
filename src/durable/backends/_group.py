"""Group commit: concurrent writes of one kind share one transaction.

Every durable write (a step, a run's outcome, a new run) is one statement, and on its
own each would be one transaction: one fsync on SQLite, one round trip and one commit
on PostgreSQL. A writer that finds nobody writing writes at once, with no queue (the
queue's bookkeeping was 2 % of a lone workflow's instructions). Writers that
arrive meanwhile queue; when the write in progress is done, the first of them is woken
to lead, and commits the whole queue as one batch while newer arrivals queue for the
next. So a lone caller pays nothing extra and many concurrent runs share commits. Each
waiting thread has its own wake-up, so a batch wakes exactly the threads it served,
not every waiter.

How a batch is written is up to the backend: by default its statements run one after
another in one transaction (`in_one_transaction`); PostgreSQL folds steps and
outcomes into single multi-row statements instead. Either way each write keeps its
own fence and its own result, and returns only once committed. A batch that fails is
retried write by write, each marked as retried, so that each write's read-back can
tell whether its first attempt committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from ._connections import Connections, Session

#: The most writes one transaction carries.
LIMIT = 64

Rows = list[tuple[Any, ...]]

#: A write's follow-up in its own transaction: given the session and the statement's
#: rows, run more statements and return the write's rows.
Then = Callable[[Session, Rows], Rows]


class Write:
    """One queued write: its statement and, once done, its rows or error.

    *name* says what it does ("Recording steps"), for error messages and fault points
    (`_faults.committed`); a batch carries its writes' name when they share one.
    *synced* False lets a batch of only such writes commit without an fsync of its own
    (`Connections.transaction`). *refused*: the error message with which the statement
    refuses to write anything (it aborts, and the database undoes it): that is an
    answer, no row changed, not a failure of the batch.
    """

    __slots__ = (
        "_wake", "done", "error", "name", "params", "refused", "retried", "rows", "sql",
        "synced", "then",
    )  # fmt: skip

    def __init__(
        self,
        sql: str,
        params: Sequence[Any],
        then: Then | None = None,
        name: str | None = None,
        *,
        synced: bool = True,
        refused: str | None = None,
    ) -> None:
        self.sql = sql
        self.params = params
        self.then = then
        self.name = name
        self.synced = synced
        self.refused = refused
        self.done = False
        self.retried = False
        self.rows: Rows = []
        self.error: BaseException | None = None
        #: a follower's: held until its write is done, or it must lead the next batch.
        self._wake: threading.Lock | None = None

    def finish(self, rows: Rows) -> None:
        """Record the write's rows."""
        self.rows, self.done = rows, True

    def fail(self, error: BaseException) -> None:
        """Record the write's failure."""
        self.error, self.done = error, True


class GroupCommit:
    """Queues writes of one kind and commits them in batches (see the module docstring).

    Args:
        write_batch: writes a batch, calling `Write.finish` or `Write.fail` on each.
    """

    def __init__(self, write_batch: Callable[[list[Write]], None]) -> None:
        self._write_batch = write_batch
        self._queue: list[Write] = []
        self._leading = False
        self._lock = threading.Lock()

    def write(
        self,
        sql: str,
        params: Sequence[Any],
        then: Then | None = None,
        *,
        name: str | None = None,
        synced: bool = True,
        refused: str | None = None,
    ) -> tuple[Rows, bool]:
        """Execute one write statement (and *then*, in the same transaction), committed
        before this returns. *name*, *synced* and *refused* are as in `Write`.

        Returns:
            The statement's rows, and whether it may have run twice (a retry after a
            failure that may have hidden a commit).

        Raises:
            StorageError: the database failed; the write may or may not have committed.
        """
        item = Write(sql, params, then, name, synced=synced, refused=refused)
        with self._lock:
            alone = not self._leading
            self._leading = True
            if not alone:  # a follower queues, and waits on a lock of its own
                item._wake = wake = threading.Lock()
                wake.acquire()
                self._queue.append(item)
        if alone:  # nobody is writing: write at once, no queue, no batch to cut
            try:
                self._write_batch([item])
            finally:
                with self._lock:
                    self._hand_over()
        else:
            wake.acquire()  # woken when done, or when it is our turn to lead
            while not item.done:
                self._lead(item)
        if item.error is not None:
            raise item.error
        return item.rows, item.retried

    def _lead(self, item: Write) -> None:
        """Write the next batch; once *item* is done, hand the lead to the next writer."""
        with self._lock:
            batch, self._queue = self._queue[:LIMIT], self._queue[LIMIT:]
        try:
            self._write_batch(batch)
        finally:
            for other in batch:
                if other._wake is not None and other is not item:
                    other._wake.release()
        with self._lock:
            if not item.done:
                return  # our write was beyond this batch: lead the next one too
            self._hand_over()

    def _hand_over(self) -> None:
        """Wake the next batch's leader, or stop leading (the caller holds the lock)."""
        if self._queue:
            follower = self._queue[0]._wake
            assert follower is not None  # every queued write waits on its own lock
            follower.release()
        else:
            self._leading = False


def in_one_transaction(db: Connections, name: str) -> Callable[[list[Write]], None]:
    """Write a batch as its statements, one after another, in one transaction.

    *name* names a batch whose writes do not share a name of their own.
    """

    def write_batch(batch: list[Write]) -> None:
        if len(batch) > 1:
            names = {write.name or name for write in batch}
            label = names.pop() if len(names) == 1 else name
            try:
                results = db.run(label, lambda session, _: _together(db, session, batch))
            except Exception:
                for write in batch:
                    write.retried = True  # the transaction may have committed unseen
            else:
                for write, rows in zip(batch, results, strict=True):
                    write.finish(rows)
                return
        one_by_one(db, name, batch)

    return write_batch


def _rows(session: Session, write: Write) -> Rows:
    """The write's rows: what it returns, or for a statement without RETURNING, one
    row holding how many rows it changed (none, if it refused: see `Write`)."""
    try:
        cursor = session.execute(write.sql, write.params)
    except Exception as error:
        if write.refused is None or str(error) != write.refused:
            raise
        return [(0,)]
    if cursor.description is None:
        return [(cursor.rowcount,)]
    return list(cursor.fetchall())


def _execute(session: Session, write: Write) -> Rows:
    rows = _rows(session, write)
    return rows if write.then is None else write.then(session, rows)


def _together(db: Connections, session: Session, batch: list[Write]) -> list[Rows]:
    with db.transaction(session, synced=any(write.synced for write in batch)):
        return [_execute(session, write) for write in batch]


def one_by_one(db: Connections, name: str, batch: list[Write]) -> None:
    """Write each statement on its own (the fallback for a batch that failed)."""
    for write in batch:

        def body(session: Session, retried: bool, write: Write = write) -> Rows:
            write.retried = write.retried or retried
            if write.then is None and (write.synced or db.relax is None):
                return _rows(session, write)
            with db.transaction(session, synced=write.synced):
                return _execute(session, write)

        try:
            write.finish(db.run(write.name or name, body))
        except BaseException as error:
            write.fail(error)
