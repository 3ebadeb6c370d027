"""The Backend contract of searching runs by id (`RunQuery.id_contains`), as an
executable check (see `_conformance.py`): the same matching on every backend, so that
a bulk action with ``--search`` selects the same runs wherever it runs."""

from __future__ import annotations

from durable.core.records import RunQuery

from ._conformance import MakeBackend, _new, _opened
from ._conformance_inspection import _created


def check_id_search_is_a_case_sensitive_substring(make: MakeBackend) -> None:
    """``RunQuery.id_contains`` matches ids holding that exact text: case matters
    (``ORDER`` does not find ``order-2``, so ``durable cancel --all --search ORDER``
    cancels no ``order`` run), in every script, and ``%``, ``_`` and ``\\`` are
    plain characters; count_runs agrees with list_runs."""
    with _opened(make) as backend:
        made = ["order-2", "ORDER-1", "Order_3", "a%b", "x_y", "x\\y", "straße", "ÉTÉ-1", "été-2"]
        for run_id in made:
            _created(backend, _new(run_id, owner=None))

        def ids(text: str) -> list[str]:
            found = sorted(
                run.id for run in backend.list_runs(RunQuery(id_contains=text), limit=100)
            )
            assert backend.count_runs(RunQuery(id_contains=text)) == len(found), text
            return found

        assert ids("ORDER") == ["ORDER-1"]
        assert ids("order") == ["order-2"]
        assert ids("Order") == ["Order_3"]
        assert ids("der") == ["Order_3", "order-2"]
        assert ids("DER-") == ["ORDER-1"]
        assert ids("%") == ["a%b"]
        assert ids("_") == ["Order_3", "x_y"]
        assert ids("x_") == ["x_y"]
        assert ids("\\") == ["x\\y"]
        assert ids("ß") == ["straße"]
        assert ids("SS") == []
        assert ids("été") == ["été-2"]
        assert ids("ÉTÉ") == ["ÉTÉ-1"]
        assert ids("-") == ["ORDER-1", "order-2", "ÉTÉ-1", "été-2"]
        assert ids("nothing") == []
