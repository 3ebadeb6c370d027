"""The state machine's rules of events: sent (once per key, along a chain), consumed by
name or by an on_event handler, and asked about (`has_events`)."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import rule

from durable.core.records import RunStatus, Step, StepKind, StepStatus
from tests.backends._machine_answers import _stored
from tests.backends._machine_base import MachineBase, runs
from tests.backends._machine_strategies import EVENT_NAMES, SHIFT
from tests.backends._model_views import view_event


class EventRules(MachineBase):
    """Sending and consuming events."""

    @rule(
        run_id=runs,
        name=st.sampled_from(EVENT_NAMES),
        key=st.sampled_from((None, None, "k1", "k2")),
        sender=st.none() | st.just("svc"),
        steer=st.sampled_from((None, "waiting", "chain")),
    )
    def send(
        self,
        run_id: str,
        name: str,
        key: str | None,
        sender: str | None,
        steer: str | None = None,
    ) -> None:
        """send_event: into the inbox, once per key; a run waiting for the name (or for
        any event) is queued; to a CONTINUED run, into its chain's current run's.
        Steered to a WAITING run, or to a CONTINUED one."""
        wanted = RunStatus.CONTINUED if steer == "chain" else RunStatus.WAITING
        run_id = self._steer(run_id, steer is not None, lambda _, run: run.status is wanted)
        payload = b'j"payload %d"' % next(self.serial)
        expected = self.model.send_event(run_id, name, payload, key=key, sender=sender)
        self._on_all(
            f"send_event({run_id!r}, {name!r}, {payload!r}, key={key!r}, sender={sender!r})",
            expected,
            lambda b: view_event(b, b.send_event(run_id, name, payload, key=key, sender=sender)),
        )

    @rule(
        run_id=runs,
        shift=SHIFT,
        name=st.sampled_from(EVENT_NAMES) | st.none(),
        exclude=st.sampled_from((None, *EVENT_NAMES)),
        back=st.integers(0, 1),
        steer=st.booleans(),
    )
    def consume(
        self,
        *,
        run_id: str,
        shift: int,
        name: str | None,
        back: int,
        exclude: str | None = None,
        steer: bool = False,
    ) -> None:
        """consume_event: the oldest unconsumed event of the name, recorded at a position;
        with no name (an on_event handler), the oldest of any name but *exclude*. Steered
        to a run with an unconsumed event."""
        run_id = self._steer(run_id, steer, lambda i, _: self.model.has_events(i, None))
        epoch = self._epoch(run_id, shift)
        position = max(0, self.model.next_position(run_id) - back)
        n = next(self.serial)
        step = Step(
            run_id=run_id,
            position=position,
            kind=StepKind.EVENT if name is not None else StepKind.HANDLER,
            name=name if name is not None else "on_event",
            call_hash=f"v1:event-{name}",
            status=StepStatus.WAITING,
            started_at=float(n),
            finished_at=float(n),
        )
        if name is not None:
            exclude = None
        expected = self.model.consume_event(step, epoch, name, exclude)
        self._on_all(
            f"consume_event({step}, {epoch}, {name!r}, exclude={exclude!r})",
            expected,
            lambda b: _stored(b, b.consume_event(step, epoch, name, exclude=exclude)),
        )

    @rule(run_id=runs, exclude=st.sampled_from((None, *EVENT_NAMES)))
    def has_events(self, run_id: str, exclude: str | None) -> None:
        """has_events: whether an unconsumed event not named *exclude* is in the inbox."""
        expected = self.model.has_events(run_id, exclude)
        self._on_all(
            f"has_events({run_id!r}, exclude={exclude!r})",
            expected,
            lambda b: b.has_events(run_id, exclude=exclude),
        )
