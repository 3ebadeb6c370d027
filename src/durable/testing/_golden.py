"""Golden histories: export a run's history to JSON, and replay today's code against one.

Keep the JSON of a real run next to your tests; `replay` re-executes the workflow
function against it, without running a single task, and raises
`NondeterminismError` where today's code would make different durable calls than
the history recorded. That is exactly the check a live run makes when it resumes
after a deploy, so a passing golden test means deployed runs will resume.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from durable.backends.memory import MemoryBackend
from durable.core.functions import Durable
from durable.core.records import Run, RunStatus, Step, StepKind, StepStatus
from durable.runtime.defaults import get_engine
from durable.runtime.dry_replay import dry_replay
from durable.runtime.engine import Engine

FORMAT = "durable-history"
VERSION = 1

_STEP_FIELDS = (
    "position", "kind", "name", "call_hash", "status", "input", "output", "error",
    "attempts", "started_at", "finished_at", "wake_at",
)  # fmt: skip
_PAYLOADS = ("input", "output", "error")


def _payload_out(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode("utf-8")  # durable's payloads are text: a header, then JSON
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _payload_in(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return str(value).encode("utf-8")


def export_history(run_id: str, *, engine: Engine | None = None) -> str:
    """The run and its recorded steps as JSON text (payloads as stored, never decoded).

    Args:
        run_id: the run to export.
        engine: where the run lives (default: the default engine).
    """
    engine = engine or get_engine()
    run = engine.reread(run_id)
    steps = []
    for step in engine.backend.load_history(run_id):
        fields = {name: getattr(step, name) for name in _STEP_FIELDS}
        for name in _PAYLOADS:
            fields[name] = _payload_out(fields[name])
        fields["kind"], fields["status"] = step.kind.value, step.status.value
        steps.append(fields)
    document = {
        "format": FORMAT,
        "version": VERSION,
        "run": {
            "id": run.id,
            "workflow": run.workflow,
            "status": run.status.value,
            "input": _payload_out(run.input),
            "call_hash": run.call_hash,
        },
        "steps": steps,
    }
    return json.dumps(document, indent=1, ensure_ascii=False)


def replay(workflow: Durable[..., Any], history: str | Mapping[str, Any]) -> None:
    """Check that today's *workflow* code is compatible with a recorded *history*.

    The workflow function runs against the history: recorded outcomes are replayed and
    nothing is executed or stored. It stops where the history ends. For a run that had
    finished, the code must also end where it ended.

    Args:
        workflow: the workflow (as decorated today).
        history: the text `export_history` produced, or that text parsed.

    Raises:
        NondeterminismError: the code makes a different durable call than the one
            recorded, at the position the error names, or ends before the history does.
        ValueError: *history* is not an exported history of this workflow.
    """
    document = json.loads(history) if isinstance(history, str) else history
    if document.get("format") != FORMAT or document.get("version") != VERSION:
        raise ValueError(
            f"Not a durable history (format {FORMAT!r} version {VERSION}): make it with "
            "durable.testing.export_history."
        )
    recorded = document["run"]
    if recorded["workflow"] != workflow.name:
        raise ValueError(
            f"This history is of workflow {recorded['workflow']!r}, not {workflow.name!r}."
        )
    engine = Engine(backend=MemoryBackend())
    try:
        _replay(engine, workflow, recorded, document["steps"])
    finally:
        engine.close()


def _replay(
    engine: Engine, workflow: Durable[..., Any], recorded: Mapping[str, Any], rows: list[Any]
) -> None:
    steps = [
        Step(
            run_id=recorded["id"],
            **{
                **row,
                **{name: _payload_in(row[name]) for name in _PAYLOADS},
                "kind": StepKind(row["kind"]),
                "status": StepStatus(row["status"]),
            },
        )
        for row in rows
    ]
    run = Run(
        id=recorded["id"], workflow=workflow.name, status=RunStatus(recorded["status"]),
        input=_payload_in(recorded["input"]) or b"", call_hash=recorded["call_hash"],
        output=None, error=None, epoch=1, lease_owner=None, lease_until=None, recoveries=0,
        parent_id=None, created_at=0.0, updated_at=0.0, finished_at=None,
    )  # fmt: skip
    dry_replay(engine, workflow, run, steps)
