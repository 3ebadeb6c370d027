"""`BackendMachine`: the differential state machine over the storage backends, its rules
of every concept composed (each concept's rules are a mixin class), with the call of
each on a run that does not exist (`unknown_run`) and the invariant checked after every
step: every backend shows the model's state and the step kept the invariants."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from durable.core.records import RunStatus, StepStatus
from tests.backends._machine_chains import ChainRules
from tests.backends._machine_control import ControlRules
from tests.backends._machine_events import EventRules
from tests.backends._machine_history import HistoryRules
from tests.backends._machine_queues import QueueRules
from tests.backends._machine_runs import RunRules
from tests.backends._machine_strategies import OWNERS
from tests.backends._machine_waits import WaitRules
from tests.backends._model_invariants import check_transition
from tests.backends._model_records import GHOST, RUN_IDS
from tests.backends._model_views import describe_difference, observe


class BackendMachine(
    RunRules, QueueRules, ControlRules, ChainRules, HistoryRules, EventRules, WaitRules
):
    """Applies each step to every backend and to the model; they must stay equal."""

    @rule(
        call=st.sampled_from(
            (
                "claim_run",
                "mark_progress",
                "release",
                "finish",
                "cancel",
                "pause",
                "resume",
                "park",
                "has_events",
                "record",
                "record_pair",
                "heartbeat",
                "send",
                "consume",
                "suspend",
                "continue",
                "fork",
            )
        )
    )
    def unknown_run(self, call: str) -> None:
        """A call naming a run that does not exist gives the documented answer."""
        fenced = {
            "claim_run": lambda: self.claim_run(
                run_id=GHOST, owner=OWNERS[0], shift=0, dead="nobody"
            ),
            "mark_progress": lambda: self.mark_progress(run_id=GHOST, shift=0),
            "release": lambda: self.release(run_id=GHOST, shift=0),
            "finish": lambda: self.finish(
                run_id=GHOST, shift=0, status=RunStatus.COMPLETED, with_step=True
            ),
            "cancel": lambda: self.cancel(run_id=GHOST),
            "pause": lambda: self.pause(run_id=GHOST),
            "resume": lambda: self.resume(run_id=GHOST, drop="start"),
            "park": lambda: self.park(run_id=GHOST, shift=0),
            "has_events": lambda: self.has_events(run_id=GHOST, exclude=None),
            "record": lambda: self.record(
                run_id=GHOST, shift=0, back=0, status=StepStatus.COMPLETED
            ),
            "record_pair": lambda: self.record_pair(run_id=GHOST, shift=0, back=0),
            "heartbeat": lambda: self.beat(
                run_id=GHOST, shift=0, back=0, attempt_shift=0, details=None
            ),
            "send": lambda: self.send(run_id=GHOST, name="go", key=None, sender=None),
            "consume": lambda: self.consume(run_id=GHOST, shift=0, name="go", back=0),
            "suspend": lambda: self.suspend(
                run_id=GHOST, shift=0, timer="past", waiting="nothing", other=GHOST
            ),
            "continue": lambda: self.continue_run(run_id=GHOST, shift=0, back=0, version=None),
            "fork": lambda: self.fork(
                original=GHOST, new_id=RUN_IDS[0], fresh=True, back=0, version=None
            ),
        }
        fenced[call]()
        self.fenced = True

    # -- the invariants ---------------------------------------------------------------

    @invariant()
    def backends_match_the_model(self) -> None:
        """Every backend shows the model's state; the step kept the invariants."""
        expected = self.model.dump()
        for name, backend in self.backends.by_name.items():
            got = observe(backend)
            if self.fenced and self.previous is not None:
                problems = describe_difference(self.previous, got)
                assert not problems, (
                    f"{name}: a call with a stale epoch changed the state:\n" + "\n".join(problems)
                )
            problems = describe_difference(expected, got)
            assert not problems, f"{name} differs from the model:\n" + "\n".join(problems)
        check_transition(self.previous, expected)
        self.previous = expected
        self.fenced = False
