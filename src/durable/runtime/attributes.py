"""`durable.set_attributes` in a run: recorded at its position, written once.

The first execution writes the attributes and the step that records them in one
transaction (`AttributeStore.record_attributes`); a replay finds the step and writes
nothing. The call's hash covers the attributes, so code that now sets other values at
that position diverges like any changed durable call. A call that would take the run
past its ``max_attributes`` fails there, and the failure is recorded: a replay raises it
again without looking.
"""

from __future__ import annotations

from durable.core.attributes import Attributes
from durable.core.hashing import call_hash
from durable.core.records import Step, StepKind, StepStatus
from durable.errors import InvalidValue, LeaseLost, StorageError

from .context import RunContext

#: The name an ATTRIBUTES step records.
NAME = "durable.set_attributes"


def set_attributes(context: RunContext, pairs: Attributes) -> None:
    """Set *pairs* (checked) on the run *context* executes, once, at the next position.

    Raises:
        ValueError: the run would hold more than the engine's ``max_attributes``.
    """
    position = context.allocate()
    digest = call_hash(StepKind.ATTRIBUTES, NAME, {"attributes": dict(pairs)})
    recorded = context.decide(position, StepKind.ATTRIBUTES, NAME, digest)
    if recorded is not None:
        context.replayed(recorded)  # raises a recorded refusal
        return
    context.flush()
    host, run_id = context.host, context.run_id
    now = host.clock.now()
    step = Step(
        run_id=run_id, position=position, kind=StepKind.ATTRIBUTES, name=NAME,
        call_hash=digest, status=StepStatus.COMPLETED, started_at=now, finished_at=now,
        epoch=context.epoch, output=host.dump(dict(pairs), f"{NAME}() at position {position}"),
    )  # fmt: skip
    try:
        held = host.backend.run_attributes([run_id]).get(run_id, {})
        count = len({*held, *(key for key, _ in pairs)})
        if count > host.max_attributes:
            refusal = ValueError(
                f"Run {run_id!r} would hold {count} attributes after set_attributes() at "
                f"position {position}; a run may hold at most {host.max_attributes} "
                "(Engine(max_attributes=...) / configure(max_attributes=...))."
            )
            error = host.dump_error(refusal)
            failed = Step(
                run_id=run_id, position=position, kind=StepKind.ATTRIBUTES, name=NAME,
                call_hash=digest, status=StepStatus.FAILED, error=error, started_at=now,
                finished_at=now, epoch=context.epoch,
            )  # fmt: skip
            stored, requests = host.backend.record(failed, context.epoch)
        else:
            stored, requests = host.backend.record_attributes(step, context.epoch, pairs)
    except (LeaseLost, StorageError) as error:
        raise context.poison(error) from None
    except InvalidValue as error:  # bad input: raised into the workflow, not an outage
        raise InvalidValue(f"Run {run_id!r} cannot set attributes: {error}") from None
    if requests:
        context.interrupts.learn(requests)
    context.replay.remember(stored)
    context.progressed()
    context.replayed(stored)  # raises the refusal (or another attempt's outcome)
