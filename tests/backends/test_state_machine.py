"""A differential state machine over the storage backends: memory, SQLite, PostgreSQL.

Hypothesis drives random sequences of the `Backend` operations (create, claim, record,
heartbeat, expire, send, consume, suspend, wake, cancel, pause, resume, park, finish,
release; continue a run as new and fork one; flow control: declare a queue's limits,
create runs with a concurrency key and a limit of their own, in bursts, debounce)
through every backend at once and through a small reference model
(`_backend_model.Model`). Each call must give the
model's answer on every backend; after each step every backend's observable state
(`Dump`) must equal the model's, and the invariants of histories, epochs, outcomes and
inboxes must hold between consecutive states.

Time. The SQL backends judge leases and timers by the database clock, which a test
cannot move, so nothing here depends on how fast a step runs:

* expiry is `renew_leases(owner, -60)`: the owner's leases end a minute ago on each
  backend's own clock, which is what a lease looks like once its owner stopped
  heart-beating. Every other lease is an hour long;
* a timer is long past (the wait is over at once) or an hour away (never due), except
  in the `nap` rule (at most MAX_NAPS times an example): its timer is NAP seconds
  away, and the rule sleeps past it before anything is observed, so a napping run is
  due whenever it is looked at;
* every rate is per hour (PER) and every debounce window an hour (its longest two):
  no start leaves a rate's window, and no debounced run comes due.

Chains, forks and versions. `continue_run` ends a run CONTINUED and creates its
successor ``<id>~1`` (only the ids in LINKS, which the dump observes); `send_event`
follows a chain to its current run, and `create` may take a successor's id first
(TAKEN: the hand-over is then an IdempotencyConflict). `fork_run` copies a run's
finished steps into a new one. Runs are created with a code version and claims draw
one, maybe serving only it (`durable.core.run_options.serves`); the dump holds each
run's `version` and `origin`.

Flow control. Claims respect the queue's concurrency, each key's limit and the rate's
allowance of first starts (`Model._choose`, `Model._admitted`), and the dump holds
`list_queues`, `next_start` and `queue_usage`. Three differences it found between
memory and SQL are pinned by `test_flow_control_agrees` (in
test_replayed_flow_control.py; memory now does as SQL).

Layout. The machine is `BackendMachine` (_backend_machine.py), its rules grouped by
concept into mixins (_machine_runs.py, _machine_queues.py, _machine_control.py,
_machine_chains.py, _machine_history.py, _machine_events.py, _machine_waits.py) over
_machine_base.py; the model is `Model` (_backend_model.py, in _model_*.py parts). What
the machine found is replayed on every backend in the test_replayed_*.py modules.

PostgreSQL joins when DURABLE_TEST_POSTGRES_URL is set; DURABLE_REQUIRE_POSTGRES=1
makes a missing URL a failure, as everywhere in the suite.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.backends._backend_machine import BackendMachine
from tests.backends._machine_backends import Backends

SETTINGS = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    # Nothing is kept between runs (CI starts from a clean clone): a failure prints its
    # steps, which replay as written (see the test_replayed_*.py modules).
    database=None,
    # Shrinking a failure takes minutes with PostgreSQL: shrink only one, and skip the
    # explain phase, whose line tracing makes every step many times slower.
    report_multiple_bugs=False,
    phases=[phase for phase in Phase if phase is not Phase.explain],
    suppress_health_check=[HealthCheck.too_slow],
)


# Shrinking a failure can take minutes with PostgreSQL (Hypothesis gives up after five).
@pytest.mark.timeout(600)
def test_backends_agree_with_the_model(open_backends: Callable[[], Backends]) -> None:
    """Random sequences of backend operations leave memory, SQLite and PostgreSQL in the
    model's state, every call giving the model's answer, and keep the invariants."""
    # A factory is accepted (documented), though the stubs say "a class".
    run_state_machine_as_test(
        lambda: BackendMachine(open_backends),  # type: ignore[arg-type]
        settings=SETTINGS,
    )
