"""The Backend conformance suite, run check by check on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from durable.backends import Backend
from durable.testing import CHECKS, check_backend
from durable.testing._conformance import MakeBackend
from tests.conftest import BACKENDS


@pytest.mark.parametrize("make_backend", BACKENDS, indirect=True)
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_contract(
    check: Callable[[MakeBackend], None], make_backend: Callable[[], Backend]
) -> None:
    """Each backend keeps each contract of the Backend protocol."""
    check(make_backend)


def test_check_backend_reports_a_broken_backend() -> None:
    """check_backend names the contract a faulty backend breaks."""
    from durable.backends.memory import MemoryBackend

    class ForgetfulBackend(MemoryBackend):
        def load_history(self, run_id: str):  # type: ignore[no-untyped-def]
            return list(reversed(super().load_history(run_id)))

    with pytest.raises(AssertionError, match="check_history_round_trip"):
        check_backend(ForgetfulBackend)


def test_check_backend_passes_the_memory_backend() -> None:
    """The public entry point accepts a correct backend."""
    from durable.backends.memory import MemoryBackend

    check_backend(MemoryBackend)
