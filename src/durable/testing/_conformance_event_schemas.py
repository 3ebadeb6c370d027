"""The Backend contract of declared event schemas (`Run.event_schemas`), as an
executable check (see `_conformance.py`): the text a run was created with comes back
on every path that creates, reads or takes a run, so a sender without the workflow's
code can check a payload before the run reaches its wait."""

from __future__ import annotations

import dataclasses

from durable.core.records import NewRun

from ._conformance import OWNER, MakeBackend, _get, _new, _opened, _queued

#: Declared schemas as the engine stores them: JSON text, {event: JSON Schema}.
_SCHEMAS = '{"approval": {"properties": {"ok": {"type": "boolean"}}, "type": "object"}}'
_OTHER = '{"review": {"properties": {"note": {"type": "string"}}, "type": "object"}}'


def check_event_schemas_round_trip(make: MakeBackend) -> None:
    """A run keeps the event schemas it was created with through create_run (owned,
    queued, starting later), create_runs, get_run, claims, continue_run (the
    successor's own), fork_run (the fork's own) and debounce_run (the first call's); a
    run created without any has None."""
    with _opened(make) as backend:
        owned, _ = backend.create_run(dataclasses.replace(_new("owned"), event_schemas=_SCHEMAS))
        assert owned.event_schemas == _SCHEMAS, "create_run returns the run as stored"
        assert _get(backend, "owned").event_schemas == _SCHEMAS
        backend.create_run(dataclasses.replace(_queued("queued"), event_schemas=_OTHER))
        claimed = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=5, lease=30
        )
        assert [run.event_schemas for run in claimed] == [_OTHER], "a claim returns it"
        later, _ = backend.create_run(
            dataclasses.replace(
                _queued("later"), start_at=backend.now() + 3600, event_schemas=_OTHER
            )
        )
        assert later.event_schemas == _OTHER and _get(backend, "later").event_schemas == _OTHER
        backend.create_run(_queued("plain"))
        assert _get(backend, "plain").event_schemas is None
        ticks = [
            dataclasses.replace(_queued("tick-1", queue="ticks"), event_schemas=_SCHEMAS),
            dataclasses.replace(_queued("tick-2", queue="ticks"), start_at=backend.now() + 3600),
        ]
        assert sorted(backend.create_runs(ticks)) == ["tick-1", "tick-2"]
        assert _get(backend, "tick-1").event_schemas == _SCHEMAS, "create_runs stores it"
        assert _get(backend, "tick-2").event_schemas is None
        successor = NewRun(
            id="owned~1", workflow="app.workflow", input=b"j[]", call_hash="v1:01",
            owner=None, lease=0.0, event_schemas=_OTHER,
        )  # fmt: skip
        assert backend.continue_run("owned", 1, successor)
        assert _get(backend, "owned~1").event_schemas == _OTHER, "the successor has its own"
        assert _get(backend, "owned").event_schemas == _SCHEMAS, "the predecessor keeps its"
        fork = dataclasses.replace(_queued("fork"), origin="owned", event_schemas=_OTHER)
        forked = backend.fork_run("owned", fork, before=0)
        assert forked is not None and forked.event_schemas == _OTHER, "a fork has its own"
        assert _get(backend, "fork").event_schemas == _OTHER
        burst = dataclasses.replace(_queued("burst"), key="k", event_schemas=_SCHEMAS)
        first, _ = backend.debounce_run(burst, window=60, longest=600)
        assert first.event_schemas == _SCHEMAS, "debounce_run returns it"
        backend.debounce_run(
            dataclasses.replace(burst, id="b2", event_schemas=None), window=60, longest=600
        )
        assert _get(backend, "burst").event_schemas == _SCHEMAS, "a debounced run keeps its first"
