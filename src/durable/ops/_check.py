"""``durable check``: would today's code resume the unfinished runs in a database?

Each unfinished run's stored history is replayed against the code registered in this
process, executing and writing nothing (`durable.runtime.dry_replay`). A run whose code now
makes other durable calls than it recorded would stop as BLOCKED on resuming after a
deploy; this says so before the deploy. Each result also names the run's code version
and, per `durable.patched` id the replay met, the branch the run takes ("new" or
"old"): once no run is on the old side, the old branch may go (`deprecate_patch`);
and, for a run waiting for a typed event, whether its stored schema differs from the
one the code declares now (``schema_changed``: why, or None).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from durable.core.records import Run, RunQuery, RunStatus, StepKind
from durable.errors import DurableError, NondeterminismError
from durable.runtime import registry as _registry
from durable.runtime.dry_replay import dry_replay
from durable.runtime.engine import Engine

from ._waiting import schema_change

UNFINISHED = (
    RunStatus.QUEUED,
    RunStatus.RUNNING,
    RunStatus.WAITING,
    RunStatus.BLOCKED,
    RunStatus.PAUSED,
)
_PAGE = 500


def unfinished(engine: Engine, limit: int | None) -> Iterator[Run]:
    """Every unfinished run, newest first, up to *limit*."""
    query = RunQuery(statuses=UNFINISHED)
    seen = 0
    while limit is None or seen < limit:
        page = engine.backend.list_runs(query, limit=_PAGE)
        for run in page:
            if limit is not None and seen >= limit:
                return
            seen += 1
            yield run
        if len(page) < _PAGE:
            return
        query = RunQuery(statuses=UNFINISHED, after=(page[-1].created_at, page[-1].id))


def check_run(engine: Engine, run: Run) -> dict[str, Any]:
    """A CheckResult: does today's code agree with *run*'s history so far?"""
    result: dict[str, Any] = {
        "run_id": run.id,
        "workflow": run.workflow,
        "status": run.status.value,
        "version": run.version,
        "ok": True,
        "position": None,
        "message": "",
        "patches": {},
    }
    target = _registry.find(run.workflow)
    if target is None:
        result["ok"] = False
        result["message"] = (
            f"No workflow or task named {run.workflow!r} is registered by the modules "
            "checked: this code could not resume the run. Check the module that defines "
            "it too, or keep the function until its runs finish."
        )
        return result
    if target.kind is not StepKind.WORKFLOW:
        result["message"] = "a task run: it runs whole, there is no history to replay"
        return result
    history = engine.backend.load_history(run.id)
    try:
        taken = dry_replay(engine, target, run, history)
    except NondeterminismError as error:
        # Inspected only: nothing happened to the run; it would block on resuming.
        message = f"would block on resuming with this code: {error}"
        result.update(ok=False, position=getattr(error, "position", None), message=message)
    except DurableError as error:
        result.update(ok=False, message=str(error))
    else:
        result["message"] = f"replays its {len(history)} recorded step(s)"
        result["patches"] = {patch: "new" if new else "old" for patch, new in taken.items()}
    result["schema_changed"] = schema_change(engine, run)
    return result
