"""The operations layer: what an operator can ask of a durable database.

The command line (``durable ls``, ``show``, ``retry``...), the REST API and the
dashboard are thin front ends over `Operations`. Its methods take plain values and
return JSON-ready dicts and lists, so ``durable ls -o json`` prints exactly what
``GET /api/v1/runs`` answers. Failures raise `OpsError` subclasses that carry an HTTP
status and an exit code. Every start, cancel, pause, resume, retry, fork and send is
recorded on the run with who did it and when (`Operations.actions`); a fork on both
runs.

    ops = Operations(durable.Engine("postgresql://..."))
    ops.list_runs(status=["failed"], since=time.time() - 3600)
    ops.retry("order-17", actor="alice")
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from durable.core.attributes import check_attributes
from durable.core.records import Run, RunQuery
from durable.core.run_options import check_priority, check_queue, check_run_id
from durable.core.tallies import HOUR, bucket
from durable.core.text import check_text
from durable.errors import (
    EventInvalid,
    IdempotencyConflict,
    InvalidValue,
    RunFinished,
    RunNotFound,
    SerializationError,
)
from durable.runtime import named, typed_events
from durable.runtime import registry as _registry
from durable.runtime.engine import Engine

from . import _control, _overview, _queues, _schedules, _views, _waiting
from ._check import check_run, unfinished
from ._errors import BadRequest, Conflict, NotFound, OpsError, no_run
from ._flows import FlowOps
from ._listing import decode_cursor, encode_cursor, run_query
from ._stats import stat, stats
from ._values import iso

__all__ = ["BadRequest", "Conflict", "NotFound", "Operations", "OpsError"]

#: The most runs one page lists.
MAX_LIMIT = 500
#: `stats` looks this far back unless told otherwise.
STATS_WINDOW = 7 * 24 * 3600.0


class Operations:
    """Inspect and operate the runs of one database, through *engine*."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend = engine.backend
        #: the process flows of this database (`durable.flows`), with these errors.
        self.flows = FlowOps(engine)

    # -- reading ----------------------------------------------------------------------

    def list_runs(
        self,
        *,
        workflow: str | None = None,
        status: Iterable[str] = (),
        queue: str | None = None,
        since: float | None = None,
        until: float | None = None,
        parent: str | None = None,
        search: str | None = None,
        version: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Runs matching the filters, newest first: ``{"items", "next_cursor"}``; each
        item with its ``attributes``. *attributes* keeps the runs holding every one
        (``{"customer": "c-42"}``; matched on their text: ``{"n": "5"}`` finds 5)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}, not {limit}.")
        query = run_query(
            workflow=workflow,
            status=status,
            queue=queue,
            since=since,
            until=until,
            parent=parent,
            search=search,
            version=version,
            attributes=attributes,
        )
        if cursor:
            query = dataclasses.replace(query, after=decode_cursor(cursor))
        # One run more than the page: whether there is a next page, in the same read.
        found = self.backend.list_runs(query, limit=limit + 1)
        page = found[:limit]
        held = self.backend.run_attributes([run.id for run in page])
        return {
            "items": [_views.run_summary(run, held.get(run.id, {})) for run in page],
            "next_cursor": encode_cursor(page[-1]) if len(found) > limit else None,
        }

    def count_runs(
        self,
        *,
        workflow: str | None = None,
        status: Iterable[str] = (),
        queue: str | None = None,
        since: float | None = None,
        until: float | None = None,
        parent: str | None = None,
        search: str | None = None,
        version: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> int:
        """How many runs match the filters (as `list_runs`)."""
        query = run_query(
            workflow=workflow,
            status=status,
            queue=queue,
            since=since,
            until=until,
            parent=parent,
            search=search,
            version=version,
            attributes=attributes,
        )
        return self.backend.count_runs(query)

    def get_run(self, run_id: str) -> dict[str, Any]:
        """One run in full (RunDetail), with the ids of its child runs and its latest
        properties (read on their own, not from the whole history)."""
        run = self._run(run_id)
        children = self.backend.list_runs(RunQuery(parent_id=run_id), limit=MAX_LIMIT)
        snapshot = self.backend.state(run_id)
        return _views.run_detail(
            run,
            sorted(child.id for child in children),
            None if snapshot is None else snapshot[0],
            self.backend.run_attributes([run_id]).get(run_id, {}),
        )

    def history(self, run_id: str) -> list[dict[str, Any]]:
        """Every recorded position of a run, in order (Step shapes); a step whose code
        changed the run's properties carries the new snapshot (``state``)."""
        self._run(run_id)
        return _views.steps(self.backend.load_history(run_id))

    def actions(self, run_id: str) -> list[dict[str, Any]]:
        """What operators did to a run, oldest first."""
        self._run(run_id)
        return [_views.action(done) for done in self.backend.actions(run_id)]

    def events(self, run_id: str) -> list[dict[str, Any]]:
        """Every event sent to a run, oldest first, consumed or not."""
        self._run(run_id)
        return [_views.event(sent) for sent in self.backend.events(run_id)]

    def stats(
        self, *, since: float | None = None, workflow: str | None = None, task: str | None = None
    ) -> dict[str, Any]:
        """Per workflow and per task: runs, success %, average, p50 and p95 duration and
        failures in the last day, over runs created (tasks started) since *since*
        (default: the last 7 days; windows are whole hours, see `_stats`). *workflow*:
        that workflow and the tasks its runs called; *task*: that task only."""
        now = self.backend.now()
        start = now - STATS_WINDOW if since is None else since
        if task is not None:
            found = stats(self.backend, since=start, now=now, kind="task", name=task)
        else:
            found = stats(self.backend, since=start, now=now, workflow=workflow)
        return {
            "since": iso(bucket(start, HOUR)),
            "workflows": [figure for figure in found if figure["kind"] == "workflow"],
            "tasks": [figure for figure in found if figure["kind"] == "task"],
        }

    def task_stats(self, name: str, *, since: float | None = None) -> dict[str, Any]:
        """One task's Stat across every run (default: the last 7 days)."""
        now = self.backend.now()
        start = now - STATS_WINDOW if since is None else since
        found = stats(self.backend, since=start, now=now, kind="task", name=name)
        return found[0] if found else {"kind": "task", **stat(name, [])}

    def overview(self) -> dict[str, Any]:
        """What the dashboard's landing page shows: counts by status, runs per minute
        and per hour, the workflows' figures, the slowest and most failing tasks,
        queues, schedules, blocked and dead runs (`_overview.overview`)."""
        return _overview.overview(self.engine)

    def workflows(self, *, since: float | None = None) -> dict[str, Any]:
        """Every workflow and task name with its figures since *since* (default: a
        week) and its runs per hour over the last day (`_overview.workflows`)."""
        return _overview.workflows(self.engine, since=since)

    def check(self, *, limit: int | None = None) -> list[dict[str, Any]]:
        """Replay every unfinished run's history against the code registered in this
        process, running nothing: a CheckResult per run (see `_check`)."""
        return [check_run(self.engine, run) for run in unfinished(self.engine, limit)]

    def waiting(self, run_id: str) -> dict[str, Any]:
        """What the run waits for; for a typed event, its name and JSON Schema (the
        form to answer it with): a Waiting (`_waiting.view`)."""
        return _waiting.view(self.engine, self._run(run_id))

    # -- acting -----------------------------------------------------------------------

    def start(
        self,
        workflow: str,
        args: Sequence[Any] = (),
        kwargs: dict[str, Any] | None = None,
        *,
        id: str | None = None,
        queue: str = "default",
        priority: int = 0,
        actor: str | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a run of a registered workflow (or task) for a worker to execute, with
        *attributes* (what it is searched by) if given."""
        try:  # the same checks as dispatch(), before anything else is looked at
            if id is not None:
                check_run_id(id)
            check_queue(queue)
            check_priority(priority)
            if attributes is not None:
                check_attributes(attributes, limit=self.engine.max_attributes)
        except (TypeError, ValueError) as error:
            raise BadRequest(str(error)) from None
        target = _registry.find(workflow)
        if target is None:
            raise NotFound(
                f"No workflow named {workflow!r} is registered in this process. Import "
                "the module that defines it (durable start --import MODULE, or durable ui "
                f"MODULE); registered: {', '.join(_registry.names()) or 'none'}."
            )
        try:  # the start by name that durable.Client makes too (runtime/named.py)
            run, created = named.start(
                self.engine, workflow, args, kwargs, run_id=id, queue=queue, priority=priority,
                attributes=attributes,
            )  # fmt: skip
        except (SerializationError, InvalidValue) as error:  # before TypeError, its base
            raise BadRequest(str(error)) from None
        except TypeError as error:
            raise BadRequest(f"The arguments do not fit: {error}.") from None
        except IdempotencyConflict as error:
            raise Conflict(str(error)) from None
        if created:  # starting it again returns the same run, and is not an action
            detail = {"workflow": workflow, "queue": queue, "priority": priority}
            self._record(run.id, "start", actor, detail)
        return _views.run_summary(run)

    def cancel(self, run_id: str, *, actor: str | None = None) -> dict[str, Any]:
        """Cancel a run and its unfinished children (cooperatively: a running one stops
        at its next durable call)."""
        return _control.cancel(self.engine, self._run(run_id), actor, self._record)

    def pause(self, run_id: str, *, actor: str | None = None) -> dict[str, Any]:
        """Pause a run and its unfinished children: a queued or waiting one at once, a
        running one at its next durable call (``pause_requested`` until then). A paused
        run is never claimed; what it waited for takes effect once it is resumed.
        Pausing a paused run changes nothing. Conflict for a finished or blocked run,
        or one being cancelled."""
        return _control.pause(self.engine, self._run(run_id), actor, self._record)

    def resume(self, run_id: str, *, actor: str | None = None) -> dict[str, Any]:
        """Let a paused run (and the paused runs below it) go on, or withdraw a pause
        request; or resume a cancelled run from where the cancellation reached its
        code (its children cancelled with it first). Conflict for any other run."""
        return _control.resume(self.engine, self._run(run_id), actor, self._record)

    def retry(self, run_id: str, *, actor: str | None = None) -> dict[str, Any]:
        """Run a failed or dead run again from where it failed: the failed calls that
        ended it are reopened, everything it finished before is replayed, not redone.
        Failed child runs it was waiting for are retried first."""
        return _control.retry(self.engine, self._run(run_id), actor, self._record)

    def fork(
        self,
        run_id: str,
        from_position: int,
        *,
        id: str | None = None,
        actor: str | None = None,
    ) -> dict[str, Any]:
        """Start a new run of the same call from a position of this one's history: the
        finished steps below it are copied (not run again), the rest runs with today's
        code (`durable.fork`). BadRequest names the valid positions; Conflict if *id* is
        taken; NotFound if the run's workflow is not registered in this process."""
        run = self._run(run_id)
        return _control.fork(
            self.engine, run, from_position, new_id=id, actor=actor, record=self._record
        )

    def send(
        self,
        run_id: str,
        event: str,
        data: Any = None,
        *,
        sender: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Put an event in a run's inbox (a human task's answer, say); the run's
        ``wait(event)`` receives *data*. A typed event's *data* is validated first: a
        BadRequest whose ``errors`` name the fields at fault, and nothing stored."""
        if not event:
            raise BadRequest("An event needs a name.")
        try:
            _check_texts(run_id=run_id, event=event, sender=sender, key=key)
            data = typed_events.checked(self.engine, run_id, event, data)
            payload = self.engine.dump(data, f"the payload of event {event!r}")
            sent = self.backend.send_event(run_id, event, payload, key=key, sender=sender)
        except EventInvalid as error:
            raise BadRequest(str(error), errors=error.errors) from None
        except (SerializationError, InvalidValue) as error:
            raise BadRequest(str(error)) from None
        except RunNotFound:
            raise NotFound(no_run(run_id)) from None
        except RunFinished as error:
            raise Conflict(str(error)) from None
        detail = {"event": event, "key": key, "event_id": sent.id}
        if sent.run_id != run_id:  # sent to a run that continued as new: its chain got it
            detail["sent_to"] = run_id
        self._record(sent.run_id, "send", sender, detail)
        return {"event": _views.event(sent)}

    # -- schedules --------------------------------------------------------------------

    def list_schedules(self) -> list[dict[str, Any]]:
        """Every schedule, by id: when it fires next, its last tick and that run."""
        return [_schedules.view(self.engine, s) for s in self.backend.list_schedules()]

    def get_schedule(self, schedule_id: str) -> dict[str, Any]:
        """One schedule (NotFound if none)."""
        return _schedules.view(self.engine, _schedules.found(self.engine, schedule_id))

    def pause_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Stop a schedule's ticks; the runs it started go on."""
        return _schedules.pause(self.engine, schedule_id)

    def resume_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Fire a paused schedule again from its next tick (missed ones are not caught up)."""
        return _schedules.resume(self.engine, schedule_id)

    def delete_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Delete a schedule; the runs it started stay."""
        return _schedules.delete(self.engine, schedule_id)

    def trigger_schedule(self, schedule_id: str) -> dict[str, Any]:
        """Start a run of the schedule now, outside its ticks."""
        return _schedules.trigger(self.engine, schedule_id)

    # -- queues -----------------------------------------------------------------------

    def queues(self) -> list[dict[str, Any]]:
        """Every queue in use or declaring limits, by name: depth, running, limits, rate,
        the oldest queued run's age and the running runs per key (`_queues.view`)."""
        return _queues.views(self.engine)

    # -- helpers ----------------------------------------------------------------------

    def _run(self, run_id: str) -> Run:
        try:
            _check_texts(run_id=run_id)
        except InvalidValue as error:
            raise BadRequest(str(error)) from None
        run = self.backend.get_run(run_id)
        if run is None:
            raise NotFound(no_run(run_id))
        return run

    def _record(self, run_id: str, action: str, actor: str | None, detail: Any) -> None:
        self.backend.record_action(run_id, action, actor=actor, detail=json.dumps(detail))


_TEXTS = {"run_id": "a run id", "event": "an event name", "sender": "a sender", "key": "a key"}


def _check_texts(**texts: str | None) -> None:
    """Refuse text no database can store (see `check_text`), naming the parameter."""
    for parameter, text in texts.items():
        if text is not None:
            check_text(text, f"{_TEXTS[parameter]} ({parameter})")
