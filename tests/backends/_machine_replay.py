"""Replaying what the machine found: a sequence of steps run on a fresh machine, every
backend checked against the model after each (the test_replayed_*.py modules)."""

from __future__ import annotations

from collections.abc import Callable

from durable.core.records import RunStatus
from tests.backends._backend_machine import BackendMachine
from tests.backends._machine_backends import Backends
from tests.backends._model_records import Dump
from tests.backends._model_views import observe


def _replay(
    open_backends: Callable[[], Backends], *steps: Callable[[BackendMachine], object]
) -> dict[str, Dump]:
    """Run *steps* on a fresh machine, every backend checked against the model after
    each; return what each backend shows at the end."""
    machine = BackendMachine(open_backends)
    try:
        for step in steps:
            step(machine)
            machine.backends_match_the_model()
        return {name: observe(backend) for name, backend in machine.backends.by_name.items()}
    finally:
        machine.teardown()


def _running(machine: BackendMachine, expected: list[str]) -> None:
    model = machine.model.runs
    assert sorted(i for i, run in model.items() if run.status is RunStatus.RUNNING) == expected
