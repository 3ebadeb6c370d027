"""Client: start and watch runs by name, from a process without the workflow code.

A web front end or another team's service imports neither the workflow modules nor
the default engine: ``Client(url)`` opens the database, starts runs by their
registered names (`runtime/named.py`, the path the REST API's ``POST /api/v1/runs``
takes too), and hands back the same `Handle` as `durable.dispatch`. Arguments are
stored as JSON, never pickled; results are read the same way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from durable.core.attributes import filters
from durable.core.records import Run, RunQuery, RunStatus
from durable.core.serde import DEFAULT_MAX_PAYLOAD, dumps
from durable.errors import PayloadTooLarge, SerializationError
from durable.runtime import named
from durable.runtime.engine import Engine

from .handles import Handle
from .waiting import send

#: The most runs one `Client.list_runs` call returns (as ``durable ls``'s pages).
MAX_LIMIT = 500


class Client:
    """Start, watch and signal runs on one database by workflow name, without
    importing the workflow code or touching the process's default engine.

    A worker that imports the workflow's module (``durable worker app.flows``) runs
    what the client starts. The client never pickles: arguments and event data are
    stored as JSON (plain data, datetimes, UUIDs, decimals...), and a result a worker
    could only store as a pickle cannot be read here (`PickleRefused`).

    Args:
        url: the database, as for `Engine` (``sqlite:///app.db``,
            ``postgresql://...``).
        max_payload: the most bytes one stored argument list may take.

    Use it as a context manager, or call `close`, to release its connections.
    """

    def __init__(self, url: str, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
        #: the engine the client talks through (its own, never the default one).
        self.engine = Engine(url, allow_pickle=False, max_payload=max_payload)

    def dispatch(
        self,
        workflow: str,
        /,
        *args: Any,
        id: str | None = None,
        queue: str = "default",
        priority: int = 0,
        timeout: dt.timedelta | float | None = None,
        key: str | None = None,
        key_concurrency: int | None = None,
        debounce: dt.timedelta | float | None = None,
        attributes: Mapping[str, Any] | None = None,
        connection: Any = None,
        **kwargs: Any,
    ) -> Handle[Any]:
        """Queue a run of the workflow registered as *workflow* (``"app.flows.order"``)
        with *args* and *kwargs*, for a worker serving *queue*; return its `Handle`.

        The options mean what they mean for `durable.dispatch`, *connection* included
        (the run inserted in your open transaction). Starting again with the same *id*
        and the same arguments returns the existing run. A run started by name is the
        call as given (see docs/howto/outbox-and-client.md): the same *id* dispatched
        from code with `durable.dispatch(fn, ...)` is another call. The workflow's own
        ``@workflow(timeout=...)`` is unknown here: pass *timeout* for a deadline.

        A keyword named like an option is the option: pass a workflow parameter of
        that name positionally.

        Raises:
            TypeError: *workflow* is not a name, or an option has the wrong type.
            ValueError: an option is out of range (an id a user may not choose...).
            SerializationError: an argument cannot be stored as JSON; nothing was
                written.
            IdempotencyConflict: *id* belongs to a run of another call.
            ConfigurationError: *connection* is on another database.
        """
        options: dict[str, Any] = {
            "queue": queue,
            "priority": priority,
            "timeout": timeout,
            "key": key,
            "key_concurrency": key_concurrency,
            "debounce": debounce,
            "connection": connection,
        }
        try:
            run, _ = named.start(
                self.engine, workflow, args, kwargs, run_id=id, attributes=attributes, **options
            )
        except PayloadTooLarge:
            raise
        except SerializationError as error:
            where = f"{_culprit(args, kwargs) or error.where} of workflow {workflow!r}"
            raise SerializationError(
                f"A Client stores arguments as JSON and never pickles, and {where} holds "
                f"a {error.type_name}, which JSON cannot express. Pass plain data (str, "
                "int, float, bool, None, lists, dicts with string keys, datetimes, UUIDs, "
                "decimals), or start the run where its code is imported.",
                where=where,
                type_name=error.type_name,
            ) from None
        return Handle(self.engine, run.id)

    def get(self, run_id: str) -> Handle[Any]:
        """A handle to run *run_id*: its ``status()``, ``result()``, ``state()``,
        ``cancel()``.

        Raises:
            RunNotFound: no run has this id.
        """
        self.engine.reread(run_id)
        return Handle(self.engine, run_id)

    def send(
        self,
        run_id: str,
        event: str,
        data: Any = None,
        *,
        key: str | None = None,
        sender: str | None = None,
    ) -> None:
        """Send event *event* with *data* to run *run_id* (see `durable.send`; *data*
        is stored as JSON). With a *key*, a retried send is delivered once; *sender*
        is recorded with the event. A typed event's *data* is checked against the JSON
        Schema its waiting run stored (`EventInvalid`; nothing sent)."""
        send(Handle(self.engine, run_id), event, data, key=key, sender=sender)

    def list_runs(
        self,
        *,
        workflow: str | None = None,
        status: Iterable[str | RunStatus] = (),
        queue: str | None = None,
        since: dt.datetime | float | None = None,
        until: dt.datetime | float | None = None,
        parent: str | None = None,
        search: str | None = None,
        version: str | None = None,
        attributes: Mapping[str, Any] | None = None,
        limit: int = 50,
        after: Run | None = None,
    ) -> list[Run]:
        """Runs matching the filters, newest first: the listing of ``durable ls``
        (*search*: a part of the run id; *since*/*until*: when they were created;
        *attributes*: runs holding every one of these, ``durable ls --attr``).
        *after*: the last run of the previous page, for the next page (runs created
        meanwhile neither repeat nor shift it).

        Raises:
            ValueError: an unknown status, *limit* outside 1..500, or an attribute
                filter that is no attribute (`durable.set_attributes` says which are).
        """
        if not 1 <= limit <= MAX_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}.")
        query = RunQuery(
            workflow=workflow,
            statuses=tuple(_status(name) for name in status),
            queue=queue,
            since=_seconds(since),
            until=_seconds(until),
            parent_id=parent,
            id_contains=search,
            version=version,
            attributes=filters(attributes or {}),
            after=None if after is None else (after.created_at, after.id),
        )
        return list(self.engine.backend.list_runs(query, limit=limit))

    def close(self) -> None:
        """Release the client's connections."""
        self.engine.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Client {getattr(self.engine.backend, 'masked_url', 'memory://')}>"


def _culprit(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """Which argument JSON cannot express: ``positional argument 0``, ``argument 'x'``."""
    named = [(f"positional argument {i}", value) for i, value in enumerate(args)]
    named += [(f"argument {key!r}", value) for key, value in kwargs.items()]
    for where, value in named:
        try:
            dumps(value, allow_pickle=False, where=where)
        except SerializationError:
            return where
    return None


def _status(name: str | RunStatus) -> RunStatus:
    try:
        return RunStatus(name)
    except ValueError:
        known = ", ".join(status.value for status in RunStatus)
        raise ValueError(f"Unknown status {name!r}: use one of {known}.") from None


def _seconds(moment: dt.datetime | float | None) -> float | None:
    if isinstance(moment, dt.datetime):
        if moment.tzinfo is None:
            raise ValueError(f"{moment!r} has no time zone: give an aware datetime.")
        return moment.timestamp()
    return moment
