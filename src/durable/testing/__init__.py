"""Testing workflows, and backends written for durable.

* `DurableEnv`: a memory backend, a virtual clock and an inline worker in one object:
  workflows that wait for days complete in milliseconds (see docs/howto/testing.md).
  The pytest plugin durable installs offers it as the ``durable_env`` fixture.
* `VirtualClock`: the clock DurableEnv uses; moves only when told.
* `export_history` and `replay`: keep a run's history as a golden file, and check that
  today's code still replays it.
* `MemoryBackend`: the in-memory backend (``durable.configure("memory://")`` uses it).
* `check_backend`: the Backend conformance suite; a third-party backend passes it.
* `arm_fault` / `disarm_faults`: make durable fail on purpose at one of its fault
  points (`FAULT_POINTS`), as chaos tests do; ``DURABLE_FAULTS`` arms subprocesses.
"""

from durable.backends.memory import MemoryBackend
from durable.core.faults import POINTS as FAULT_POINTS
from durable.core.faults import InjectedFault
from durable.core.faults import arm as arm_fault
from durable.core.faults import disarm as disarm_faults
from durable.testing._env import DurableEnv, History, VirtualClock
from durable.testing._golden import export_history, replay
from durable.testing._suite import CHECKS, check_backend

__all__ = [
    "CHECKS",
    "FAULT_POINTS",
    "DurableEnv",
    "History",
    "InjectedFault",
    "MemoryBackend",
    "VirtualClock",
    "arm_fault",
    "check_backend",
    "disarm_faults",
    "export_history",
    "replay",
]
