"""OpenTelemetry spans for the runs a process executes: an observer (`observers.py`).

Each execution of a run is a span, ``durable.run <workflow>``, and each attempt of a
task's body a span, ``durable.task <task>``, its child. The W3C trace context of the
code that creates a run (`dispatch`, `execute`, a parent's child call) is stored with
the run (`carrier`); every execution of it, in whichever process, is a child of that
span, so one trace follows a request into the worker that runs it. Replayed positions
run no body, so they make no span: a resumed run is one more ``durable.run`` span under
the same parent, ``durable.resumed`` true, holding only the attempts it made.

`opentelemetry-api` is imported only when it is installed and tracing is not turned
off (`tracing=False`, ``DURABLE_TRACING=0``). Without an SDK provider the API's spans
do nothing; with one, the application's exporter gets them with no further call.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

from durable.errors import ConfigurationError

from .observers import NOTHING, Attempt, Execution

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

#: ``DURABLE_TRACING=0`` turns spans off where the code does not say.
TRACING_ENV = "DURABLE_TRACING"

#: Outcomes that are not errors: the span's status is OK (`observers.OUTCOMES`).
_FINE = frozenset({"completed", "released", "continued"})


def tracing_wanted(option: bool | None, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether to make spans: the option if given, else ``$DURABLE_TRACING`` (1/0,
    true/false), else on; on only if opentelemetry is installed, unless asked for.

    Raises:
        ConfigurationError: the variable is not a yes or a no, or ``tracing=True``
            without opentelemetry installed.
    """
    installed = importlib.util.find_spec("opentelemetry") is not None
    if option is None:
        value = environ.get(TRACING_ENV, "").strip().lower()
        if value in ("0", "false", "no"):
            return False
        if value not in ("", "1", "true", "yes"):
            raise ConfigurationError(f"{TRACING_ENV} must be 1 or 0 (true/false), got {value!r}.")
        return installed
    if option and not installed:
        raise ConfigurationError(
            "tracing=True needs OpenTelemetry's API: pip install 'durable[otel]'."
        )
    return bool(option)


class Spans:
    """The observer that makes the spans (see the module's docstring)."""

    def __init__(self) -> None:
        from opentelemetry import context, propagate, trace

        self._context, self._propagate, self._trace = context, propagate, trace
        #: the providers whose spans do nothing: the API's stand-in before the
        #: application sets one (which it may do at any time), and its no-op.
        self._idle = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self._set = False
        # A proxy until the application sets a provider: then it delegates to that one.
        self._tracer = trace.get_tracer("durable")
        #: run id -> its execution's context here: the parent of its attempts run on
        #: other threads (parallel calls), where the execution's context is not current.
        self._executions: dict[str, Context] = {}

    def carrier(self) -> str | None:
        """The calling code's trace context (JSON of the propagator's headers), or None
        outside any span."""
        headers: dict[str, str] = {}
        self._propagate.inject(headers)
        return json.dumps(headers, sort_keys=True) if headers else None

    def created(self, run: Any) -> None:
        """Nothing: the run's context was taken as it was made (`carrier`)."""

    def execution(self, seen: Execution) -> AbstractContextManager[None]:
        return self._execution(seen) if self._live() else NOTHING

    def attempt(self, seen: Attempt) -> AbstractContextManager[None]:
        # Asked at each execution's start, not at each attempt: an attempt belongs to an
        # execution, which has a span if and only if a provider was set by then.
        return self._attempt(seen) if self._set else NOTHING

    def _live(self) -> bool:
        """Whether the application has set a tracer provider: without one, a span per
        call would be made for nothing. Once set, the global provider stays. (Asking
        costs a lookup in the environment: once per execution.)"""
        if self._set:
            return True
        self._set = type(self._trace.get_tracer_provider()) not in self._idle
        return self._set

    @contextmanager
    def _execution(self, seen: Execution) -> Iterator[None]:
        run = seen.run
        parent = self._extract(run.trace_context)
        attributes: dict[str, Any] = {
            "durable.run_id": run.id,
            "durable.workflow": run.workflow,
            "durable.resumed": seen.resumed,
        }
        if run.parent_id is not None:
            attributes["durable.parent_id"] = run.parent_id
        span = self._tracer.start_span(
            f"durable.run {run.workflow}", context=parent, attributes=attributes
        )
        here = self._trace.set_span_in_context(span, parent)
        token = self._context.attach(here)
        self._executions[run.id] = here
        try:
            yield
        finally:
            self._executions.pop(run.id, None)
            self._context.detach(token)
            self._end(span, seen.outcome, seen.error)

    @contextmanager
    def _attempt(self, seen: Attempt) -> Iterator[None]:
        parent = None
        if not self._trace.get_current_span().get_span_context().is_valid:
            parent = self._executions.get(seen.run_id)
        span = self._tracer.start_span(
            f"durable.task {seen.task}",
            context=parent,
            attributes={
                "durable.run_id": seen.run_id,
                "durable.workflow": seen.workflow,
                "durable.task": seen.task,
                "durable.position": seen.position,
                "durable.attempt": seen.attempt,
            },
        )
        token = self._context.attach(self._trace.set_span_in_context(span, parent))
        try:
            yield
        finally:
            self._context.detach(token)
            self._end(span, seen.outcome, seen.error)

    def _extract(self, stored: str | None) -> Context | None:
        """The context a run was created in (None: none stored, the current one)."""
        if stored is None:
            return None
        try:
            headers = json.loads(stored)
        except ValueError:
            return None  # not ours to refuse: the run still runs, in a trace of its own
        return self._propagate.extract(headers) if isinstance(headers, dict) else None

    def _end(self, span: Span, outcome: str | None, error: BaseException | None) -> None:
        if span.is_recording():
            outcome = outcome or "interrupted"
            span.set_attribute("durable.outcome", outcome)
            status = self._trace.StatusCode.OK if outcome in _FINE else self._trace.StatusCode.ERROR
            if error is not None and outcome not in _FINE:
                span.record_exception(error)
                span.set_status(status, f"{type(error).__name__}: {error}")
            else:
                span.set_status(status)
        span.end()
