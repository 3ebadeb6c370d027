"""Process flows for operators: the verbs of `durable.flows`, with the operations
layer's errors (so the CLI's exit codes and the API's statuses are the same as for
runs): an unknown flow or task is `NotFound`, a verb that does not apply to the task
as it stands is `Conflict`, an answer that does not match its form is `BadRequest`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from durable import flows as _flows
from durable.errors import BadAnswer, FlowRefused, InvalidValue, RunNotFound, UnknownTask
from durable.runtime.engine import Engine

from ._errors import BadRequest, Conflict, NotFound

T = TypeVar("T")
#: The most flows one page lists.
MAX_LIMIT = 500


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except (RunNotFound, UnknownTask) as error:
        raise NotFound(str(error)) from None
    except (BadAnswer, InvalidValue) as error:
        raise BadRequest(str(error)) from None
    except FlowRefused as error:
        raise Conflict(str(error)) from None


class FlowOps:
    """The flows of one database (`Operations.flows`)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def list(self, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
        """Flow instances, newest first: ``{"items", "next_cursor"}``."""
        if not 1 <= limit <= MAX_LIMIT:
            raise BadRequest(f"limit must be between 1 and {MAX_LIMIT}, not {limit}.")
        after = _decode(cursor) if cursor else None
        found = _flows.flows(limit=limit + 1, after=after, engine=self.engine)
        page = found[:limit]
        more = len(found) > limit
        return {"items": page, "next_cursor": _encode(page[-1]) if more and page else None}

    def view(self, flow_id: str) -> dict[str, Any]:
        """One flow, task by task (`durable.flows.view`)."""
        return self._call(_flows.view, flow_id, engine=self.engine)

    def logs(self, flow_id: str, task: str) -> dict[str, Any]:
        """A task's captured output (`durable.flows.logs`)."""
        return self._call(_flows.logs, flow_id, task, engine=self.engine)

    def restart(self, flow_id: str, task: str, *, actor: str | None = None) -> dict[str, Any]:
        """Run a task again, then everything downstream of it."""
        return self._call(_flows.restart, flow_id, task, actor=actor, engine=self.engine)

    def kill(self, flow_id: str, task: str, *, actor: str | None = None) -> dict[str, Any]:
        """End a running task's command (or nested flow)."""
        return self._call(_flows.kill, flow_id, task, actor=actor, engine=self.engine)

    def done(
        self,
        flow_id: str,
        task: str,
        data: Any = None,
        *,
        status: str = "finished",
        actor: str | None = None,
    ) -> dict[str, Any]:
        """Answer a human task."""
        return self._call(
            _flows.done, flow_id, task, data, status=status, actor=actor, engine=self.engine
        )

    def history(self, flow_name: str) -> dict[str, Any]:
        """Each command task's runs, success % and average time across the instances of
        flow *flow_name*."""
        return {"flow": flow_name, "tasks": _flows.task_history(flow_name, engine=self.engine)}

    @staticmethod
    def _call(verb: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        with _translated():
            return verb(*args, **kwargs)


def _encode(item: dict[str, Any]) -> str:
    raw = json.dumps([item["created_at"], item["id"]]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode(cursor: str) -> tuple[float, str]:
    try:
        created, run_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return float(created), str(run_id)
    except (binascii.Error, ValueError, TypeError) as error:
        raise BadRequest(f"cursor {cursor!r} is not one this API gave: {error}.") from None
