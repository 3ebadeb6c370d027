"""What every role of `SQLBackend` shares: its connections, its compiled statements,
its in-process hub, and running one statement."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from durable.backends._connections import Connections
from durable.backends._hub import Hub
from durable.backends._statements import Queries
from durable.backends._statements.base import Statement


class SQLBase:
    """The state `SQLBackend.__init__` sets up, and the two helpers every role uses."""

    _db: Connections
    _sql: Queries
    _hub: Hub
    #: A list parameter as the driver takes it: JSON text (SQLite) or a list.
    _names: Callable[[Sequence[Any]], Any]

    def _execute(self, conn: Any, statement: Statement, values: Mapping[str, Any]) -> Any:
        return conn.execute(statement.sql, statement.params(values))

    def _announce(self, rows: Sequence[Sequence[Any]]) -> None:
        """Wake waiters in this process on the topics a statement returned first."""
        for row in rows:
            self._hub.notify(row[0])
