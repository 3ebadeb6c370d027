"""The whole Backend conformance suite: `check_backend` runs every check in `CHECKS`."""

from __future__ import annotations

from collections.abc import Callable

from ._conformance import CORE_CHECKS, MakeBackend
from ._conformance_inspect import INSPECT_CHECKS
from ._conformance_purge import PURGE_CHECKS
from ._conformance_waits import WAIT_CHECKS

#: Every check, in the order check_backend runs them.
CHECKS: tuple[Callable[[MakeBackend], None], ...] = (
    CORE_CHECKS + WAIT_CHECKS + PURGE_CHECKS + INSPECT_CHECKS
)


def check_backend(make_backend: MakeBackend) -> None:
    """Run every Backend contract check against fresh backends from *make_backend*.

    *make_backend* must return a new, empty backend each time it is called.

    Raises:
        AssertionError: naming the contract the backend breaks.
    """
    for check in CHECKS:
        try:
            check(make_backend)
        except AssertionError as error:
            raise AssertionError(f"{check.__name__}: {check.__doc__} -- {error}") from error
