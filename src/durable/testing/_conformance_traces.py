"""The Backend contract of trace contexts (`Run.trace_context`), as an executable check
(see `_conformance.py`): the text a run was created with comes back on every path that
reads or takes the run, so a worker's spans join the trace of the code that created it."""

from __future__ import annotations

import dataclasses

from durable.core.records import NewRun

from ._conformance import OWNER, MakeBackend, _get, _new, _opened, _queued

#: W3C trace contexts as the engine stores them (JSON of the propagator's carrier).
_CONTEXT = '{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'
_OTHER = '{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'


def check_trace_context_round_trip(make: MakeBackend) -> None:
    """A run keeps the trace context it was created with, owned or queued, through
    get_run, claims, continue_run (the successor's own), fork_run and debounce_run
    (the first call's); a run created without one has None."""
    with _opened(make) as backend:
        owned, _ = backend.create_run(dataclasses.replace(_new("owned"), trace_context=_CONTEXT))
        assert owned.trace_context == _CONTEXT, "create_run returns the run as stored"
        assert _get(backend, "owned").trace_context == _CONTEXT
        backend.create_run(dataclasses.replace(_queued("queued"), trace_context=_OTHER))
        claimed = backend.claim_next(
            owner=OWNER, queue="default", workflows=["app.workflow"], limit=5, lease=30
        )
        assert [run.trace_context for run in claimed] == [_OTHER], "a claim returns it"
        backend.create_run(_queued("plain"))
        assert _get(backend, "plain").trace_context is None
        successor = NewRun(
            id="owned~1", workflow="app.workflow", input=b"j[]", call_hash="v1:01",
            owner=None, lease=0.0, trace_context=_OTHER,
        )  # fmt: skip
        assert backend.continue_run("owned", 1, successor)
        assert _get(backend, "owned~1").trace_context == _OTHER
        assert _get(backend, "owned").trace_context == _CONTEXT, "the predecessor keeps its"
        fork = dataclasses.replace(_queued("fork"), origin="owned", trace_context=_CONTEXT)
        forked = backend.fork_run("owned", fork, before=0)
        assert forked is not None and forked.trace_context == _CONTEXT
        assert _get(backend, "fork").trace_context == _CONTEXT
        burst = dataclasses.replace(_queued("burst"), key="k", trace_context=_OTHER)
        backend.debounce_run(burst, window=60, longest=600)
        backend.debounce_run(
            dataclasses.replace(burst, id="b2", trace_context=None), window=60, longest=600
        )
        assert _get(backend, "burst").trace_context == _OTHER, "a debounced run keeps its first"
