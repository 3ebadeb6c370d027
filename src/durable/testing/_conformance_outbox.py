"""The contract of `RunStore.create_run_in` that needs no database driver: what is
not a transaction to join is refused, and nothing is written. (The inserts in real
SQLAlchemy transactions, committed, rolled back and on another database, are in
tests/integration/test_outbox.py: this suite must not depend on SQLAlchemy's API.)"""

from __future__ import annotations

from durable.core.records import RunQuery
from durable.errors import ConfigurationError

from ._conformance import MakeBackend, _opened, _queued


def check_create_run_in_refuses_what_is_no_transaction(make: MakeBackend) -> None:
    """create_run_in with an object that is no open transaction of this database raises
    TypeError (or ConfigurationError, from a backend with no transactions to share) and
    writes nothing."""
    with _opened(make) as backend:
        for thing in (None, "postgresql://elsewhere/db", object()):
            try:
                backend.create_run_in(_queued("outbox-1"), thing)
            except (TypeError, ConfigurationError):
                pass
            else:
                raise AssertionError(f"create_run_in accepted {thing!r} as a transaction")
        assert backend.get_run("outbox-1") is None, "a refused create_run_in wrote a run"
        assert backend.count_runs(RunQuery()) == 0
