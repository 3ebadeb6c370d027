"""Every SQL statement durable runs, written once in SQLAlchemy Core.

`compiled(dialect)` compiles them for SQLite or PostgreSQL when the first backend of
that kind opens in a process (about 75 ms), and hands later ones the same; at run
time the backend (`durable.backends.sql`) sends the compiled text straight to the
driver. Compiling per call costs more than an fsync-backed commit (see
docs/performance.md). The statements are grouped by the role of the storage seam they
serve, one module each: runs.py, continuing.py, history.py, waits.py, inspection.py,
control.py, schedules.py, queues.py, debounce.py, attributes.py, streams.py and
tallies.py, on the shared pieces of base.py. Every write is a single statement, so each
is its own short transaction (but a stream's, see streams.py):

* recording a step is one ``INSERT ... SELECT ... WHERE EXISTS (run at my epoch)
  ON CONFLICT DO UPDATE ... WHERE unfinished``: the fence and the write in one go
  (on SQLite without ``RETURNING``, see `HistoryStatements.record_quiet`);
* state changes are compare-and-set ``UPDATE ... WHERE id = ? AND epoch = ?``;
* times come from the database clock (``clock_timestamp()`` on PostgreSQL).
"""

from __future__ import annotations

import threading

import sqlalchemy as sa

from .attributes import AttributeStatements
from .continuing import ContinuingStatements
from .control import ControlStatements
from .debounce import DebounceStatements
from .history import HistoryStatements
from .inspection import InspectionStatements
from .queues import QueueStatements
from .runs import RunStatements
from .schedules import ScheduleStatements
from .streams import StreamStatements
from .tallies import TallyStatements
from .waits import WaitStatements


class Queries(
    RunStatements,
    ContinuingStatements,
    HistoryStatements,
    WaitStatements,
    InspectionStatements,
    ControlStatements,
    ScheduleStatements,
    QueueStatements,
    DebounceStatements,
    AttributeStatements,
    StreamStatements,
    TallyStatements,
):
    """Every statement the backend runs, compiled for one dialect: one attribute each."""

    def __init__(self, dialect: sa.Dialect) -> None:
        super().__init__(dialect)
        self._define_runs()
        self._define_continuing()
        self._define_history()
        self._define_waits()
        self._define_inspection()
        self._define_control()
        self._define_schedules()
        self._define_queues()
        self._define_attributes()
        self._define_streams()
        self._define_tallies()


_compiled: dict[tuple[str, str], Queries] = {}
_compiling = threading.Lock()


def compiled(dialect: sa.Dialect) -> Queries:
    """The statements for *dialect*'s kind, compiled once per process: they depend on
    nothing else (not the database, not the schema, which the connection's search path
    names), and compiling them took most of the time a backend took to open: every
    engine after a process's first (a test's fresh database, a second engine) no longer
    pays it. (A `Queries` is never changed after it is
    made but for its cache of run listings, which any thread may fill.)"""
    key = (dialect.name, str(dialect.paramstyle))
    with _compiling:
        found = _compiled.get(key)
        if found is None:
            found = _compiled[key] = Queries(dialect)
    return found
