"""The plumbing every rule of the state machine shares: its bundle of run ids
(`runs`), its backends and model, one call on every backend against the model's answer
(`_on_all`), a call's epoch (maybe stale), steering a rule to a run, creating a run,
and making a step."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis.stateful import Bundle, RuleBasedStateMachine

from durable.backends import Backend
from durable.core.records import NewRun, Step, StepKind, StepStatus
from durable.errors import IdempotencyConflict, LeaseLost, RunFinished, RunNotFound
from tests.backends._backend_model import Model
from tests.backends._machine_answers import _created
from tests.backends._machine_backends import Backends
from tests.backends._machine_strategies import MAX_NAPS
from tests.backends._model_records import LEASE, RUN_IDS, Dump, Raised, RunView

#: the ids of runs created so far (steps act on those; `unknown_run` on others).
runs: Bundle[str] = Bundle("runs")


class MachineBase(RuleBasedStateMachine):
    """What the rules of `BackendMachine` share; each concept's rules are a subclass."""

    #: the bundle every mixin's rules draw run ids from (and `create` and others fill).
    runs = runs

    def __init__(self, open_backends: Callable[[], Backends]) -> None:
        super().__init__()
        self.backends = open_backends()
        self.model = Model()
        self.previous: Dump | None = None
        #: the last step passed a stale epoch: it must not have changed anything.
        self.fenced = False
        self.naps_left = MAX_NAPS
        self.serial = itertools.count(1)

    def teardown(self) -> None:
        self.backends.close()

    # -- helpers ----------------------------------------------------------------------

    def _on_all(self, what: str, expected: object, call: Callable[[Backend], object]) -> None:
        """Run *call* on every backend; each must give the model's *expected* answer."""
        got: dict[str, object] = {}
        for name, backend in self.backends.by_name.items():
            try:
                got[name] = call(backend)
            except (LeaseLost, RunNotFound, RunFinished, IdempotencyConflict) as error:
                got[name] = Raised(type(error).__name__, error.run_id)
        wrong = [name for name, value in got.items() if value != expected]
        if wrong:
            lines = [f"{what} gave a different answer on {', '.join(wrong)}:"]
            lines.append(f"  model:    {expected!r}")
            lines += [f"  {name + ':':9} {value!r}" for name, value in got.items()]
            raise AssertionError("\n".join(lines))

    def _epoch(self, run_id: str, shift: int) -> int:
        self.fenced = shift != 0
        run = self.model.runs.get(run_id)
        return (run.epoch if run is not None else 0) + shift

    def _steer(self, run_id: str, steer: bool, *wanted: Callable[[str, RunView], bool]) -> str:
        """*run_id*, or with *steer* the first run from it on (RUN_IDS in a circle) that
        the model shows as the first of *wanted* that any run is: for cases a rule would
        seldom meet by chance."""
        if not steer or run_id not in RUN_IDS:
            return run_id
        start = RUN_IDS.index(run_id)
        circle = RUN_IDS[start:] + RUN_IDS[:start]
        for test in wanted:
            for other in circle:
                run = self.model.runs.get(other)
                if run is not None and test(other, run):
                    return other
        return run_id

    def _create(
        self,
        run_id: str,
        owner: str | None,
        queue: str,
        priority: int,
        workflow: str,
        *,
        same_call: bool,
        parent: str | None,
        timeout: float | None = None,
        key: str | None = None,
        key_limit: int | None = None,
        version: str | None = None,
    ) -> bool:
        call = run_id if same_call else "other"
        new = NewRun(
            id=run_id,
            workflow=workflow,
            input=f'j["{call}"]'.encode(),
            call_hash=f"v1:{call}",
            owner=owner,
            lease=LEASE,
            parent_id=None if parent == run_id else parent,
            queue=queue,
            priority=priority,
            timeout=timeout,
            key=key,
            key_limit=key_limit,
            version=version,
        )
        expected = self.model.create(new)
        self._on_all(f"create_run({new})", expected, lambda b: _created(b, b.create_run(new)))
        return expected[1]

    def _step(self, run_id: str, position: int, status: StepStatus) -> Step:
        n = next(self.serial)
        quiet = (StepStatus.COMPLETED, StepStatus.WAITING, StepStatus.RUNNING)
        return Step(
            run_id=run_id,
            position=position,
            kind=StepKind.TASK,
            name=f"app.task{position}",
            call_hash=f"v1:{position:02d}",
            status=status,
            input=b"j[%d]" % n,
            output=b"j%d" % n if status is StepStatus.COMPLETED else None,
            error=None if status in quiet else b"je%d" % n,
            attempts=n,
            started_at=float(n),
            finished_at=float(n) if status.finished else None,
            # A RUNNING step with a wake_at is a hung attempt (its heartbeat deadline, in
            # 1970: past), making its run claimable; without one it is not.
            wake_at=None
            if status.finished or (status is StepStatus.RUNNING and n % 2)
            else float(n) + 0.5,
            # Some steps end code that changed the properties: a later write without a
            # snapshot keeps theirs (see `state`).
            state=b'j{"n":%d}' % n if n % 3 == 0 else None,
        )
