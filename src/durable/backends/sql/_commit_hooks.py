"""Calls made when a caller's SQLAlchemy transaction commits what durable wrote in it.

A run inserted in the caller's transaction (`SQLOutbox.create_run_in`) exists only if
that transaction commits; what happens because it exists (a metric counting it) waits
for the commit. `when_committed` keeps, per ``Connection``, the calls waiting for its
transaction: its ``commit`` event makes them, its ``rollback`` drops them, and a
``rollback_savepoint`` drops those made inside that savepoint (or one inside it). Three
listeners per connection, registered once; the calls waiting are a transaction's worth.

The ``commit`` event comes just before the database's own commit: a commit that then
fails has made its calls. SQLAlchemy has no event after a connection's commit, and a
commit that fails is rare enough for what waits here (counts, not data). A call that
raises is logged, and the caller's commit goes on.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable

import sqlalchemy as sa

log = logging.getLogger("durable")

#: A call waiting for a commit, with the names of the savepoints it was made in.
_Call = tuple[frozenset[str], Callable[[], None]]
#: Each connection's calls waiting for its commit.
_waiting: weakref.WeakKeyDictionary[sa.Connection, list[_Call]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def when_committed(conn: sa.Connection, call: Callable[[], None]) -> None:
    """Make *call* when *conn*'s transaction (open now) commits; never if it rolls
    back, or if the savepoint open now (or one around it) is rolled back."""
    with _lock:
        waiting = _waiting.get(conn)
        if waiting is None:
            waiting = _waiting[conn] = []
            sa.event.listen(conn, "commit", _committed)
            sa.event.listen(conn, "rollback", _rolled_back)
            sa.event.listen(conn, "rollback_savepoint", _savepoint_rolled_back)
    waiting.append((_savepoints(conn), call))


def _savepoints(conn: sa.Connection) -> frozenset[str]:
    """The names of the savepoints open on *conn*, the innermost and those around it.
    SQLAlchemy names a savepoint only on its private ``_savepoint``; without it, none."""
    names = set()
    nested = conn.get_nested_transaction()
    while nested is not None:
        name = getattr(nested, "_savepoint", None)
        if isinstance(name, str):
            names.add(name)
        nested = getattr(nested, "_previous_nested", None)
    return frozenset(names)


def _take(conn: sa.Connection) -> list[_Call]:
    waiting = _waiting.get(conn, [])
    calls = waiting[:]
    waiting.clear()
    return calls


def _committed(conn: sa.Connection) -> None:
    for _, call in _take(conn):
        try:
            call()
        except Exception:  # the caller's commit goes on whatever a call does
            log.exception("A call waiting for a commit failed; the commit goes on")


def _rolled_back(conn: sa.Connection) -> None:
    _take(conn)


def _savepoint_rolled_back(conn: sa.Connection, name: str, _context: object) -> None:
    waiting = _waiting.get(conn, [])
    waiting[:] = [(inside, call) for inside, call in waiting if name not in inside]
