"""A backend's answers as the model writes them (`Model` answers with views, not
records), and the creation times of the runs they made kept apart."""

from __future__ import annotations

import time

from durable.backends import Backend
from durable.core.records import Run, Step
from tests.backends._model_views import view_run, view_step


def _created(backend: Backend, result: tuple[Run, bool]) -> object:
    """create_run's and debounce_run's answer, as the model writes it."""
    run, created = result
    if created:
        _apart(backend, run)
    return view_run(backend, run), created


def _apart(backend: Backend, run: Run | None) -> None:
    """After *run* was created: claim_next takes the oldest first, so keep creation
    times apart, even on SQLite, whose clock counts milliseconds."""
    if run is not None:
        while backend.now() <= run.created_at:
            time.sleep(0.001)


def _forked(backend: Backend, run: Run | None) -> object:
    """fork_run's answer, as the model writes it."""
    _apart(backend, run)
    return view_run(backend, run)


def _handed_over(backend: Backend, done: bool, successor: str) -> bool:
    """continue_run's answer; its successor's creation time kept apart."""
    if done:
        _apart(backend, backend.get_run(successor))
    return done


def _stored(backend: Backend, result: tuple[Step, int] | None) -> object:
    """record's and consume_event's answer, as the model writes it."""
    if result is None:
        return None
    step, flags = result  # the run's requests (CANCEL_REQUEST | PAUSE_REQUEST)
    return view_step(backend, step), flags
