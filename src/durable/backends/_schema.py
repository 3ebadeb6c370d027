"""Tables, indexes and the schema version, for SQLite and PostgreSQL.

The schema is a versioned contract: `SCHEMA_VERSION` names the shape this code writes,
`durable_meta` records the shape a database has. A new database is created at the
current shape (`create`); an older one is moved up one version at a time by
`_migrations.MIGRATIONS[n]` (n to n+1). A database newer than the code is refused.
tests/backends/test_migrations.py checks that migrating gives what creating gives.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.schema import CreateIndex, CreateTable

metadata = sa.MetaData()

runs = sa.Table(
    "durable_runs",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("workflow", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("input", sa.LargeBinary, nullable=False),
    sa.Column("call_hash", sa.Text, nullable=False),
    sa.Column("output", sa.LargeBinary),
    sa.Column("error", sa.LargeBinary),
    sa.Column("epoch", sa.Integer, nullable=False),
    sa.Column("lease_owner", sa.Text),
    sa.Column("lease_until", sa.Double),
    sa.Column("recoveries", sa.Integer, nullable=False),
    sa.Column("parent_id", sa.Text),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.Column("finished_at", sa.Double),
    # Added in version 2 (workers):
    sa.Column("queue", sa.Text, nullable=False, server_default="default"),
    sa.Column("priority", sa.Integer, nullable=False, server_default="0"),
    sa.Column("started_at", sa.Double),
    sa.Column("cancel_requested", sa.Integer, nullable=False, server_default="0"),
    # Added in version 3 (time and events):
    sa.Column("wake_at", sa.Double),
    sa.Column("waiting_on", sa.Text),
    # Added in version 8: when the run must have ended (its timeout after creation).
    sa.Column("deadline_at", sa.Double),
    # Added in version 9: the properties a run's code published as it ended (JSON).
    sa.Column("state", sa.LargeBinary),
    # Added in version 11 (flow control): the key runs that must not run together share,
    # a limit of the run's own on them, and the key of a debounced run not yet started.
    sa.Column("concurrency_key", sa.Text),
    sa.Column("key_limit", sa.Integer),
    sa.Column("debounce_key", sa.Text),
    # Added in version 12 (safe deploys): the code version of the process that started
    # the run, and the run whose history a fork copied (its origin).
    sa.Column("version", sa.Text),
    sa.Column("origin", sa.Text),
    # Added in version 14 (traces): the W3C trace context of the code that created the
    # run (JSON: traceparent, tracestate), its executions' spans' parent.
    sa.Column("trace_context", sa.Text),
    # Added in version 16 (typed events): the JSON Schemas of the events the run's
    # workflow declares (JSON: {event: schema}), what a sender without the code checks.
    sa.Column("event_schemas", sa.Text),
    # recover() and the lease sweep look for RUNNING runs by lease expiry.
    sa.Index("durable_runs_status_lease", "status", "lease_until"),
    sa.Index("durable_runs_created", "created_at"),
    # Rows live in the primary-key b-tree: one b-tree fewer to write per commit.
    sqlite_with_rowid=False,
)

history = sa.Table(
    "durable_history",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("call_hash", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("input", sa.LargeBinary),
    sa.Column("output", sa.LargeBinary),
    sa.Column("error", sa.LargeBinary),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Double),
    sa.Column("finished_at", sa.Double),
    sa.Column("epoch", sa.Integer, nullable=False),
    # Added in version 3: a WAITING step's deadline, a RETRYING one's next attempt.
    sa.Column("wake_at", sa.Double),
    # Added in version 7: a RUNNING task attempt's last heartbeat, and the details the
    # task last gave it (kept across attempts, for `durable.last_heartbeat()`).
    sa.Column("heartbeat_at", sa.Double),
    sa.Column("details", sa.LargeBinary),
    # Added in version 9: the properties snapshot taken where this step ended a stretch
    # of workflow code that changed them (JSON; for readers, not for replay).
    sa.Column("state", sa.LargeBinary),
    sqlite_with_rowid=False,
)

# Version 3: each run's inbox. Events wait here until a wait consumes them, oldest
# first (by id: sends to one run are serialized on its row, so ids follow sends).
events = sa.Table(
    "durable_events",
    metadata,
    sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),  # SQLite: a rowid alias
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=False),
    sa.Column("sent_at", sa.Double, nullable=False),
    sa.Column("sender", sa.Text),
    sa.Column("key", sa.Text),
    sa.Column("consumed_position", sa.Integer),
    sa.Column("consumed_at", sa.Double),
)


def _serial_id() -> sa.Column[int]:
    """An autoincrementing primary key (a rowid alias on SQLite)."""
    return sa.Column(
        "id",
        sa.BigInteger().with_variant(sa.Integer, "sqlite"),
        primary_key=True,
        autoincrement=True,
    )


# Version 4: what operators did to runs (CLI, API, dashboard): who, what, when.
actions = sa.Table(
    "durable_actions",
    metadata,
    _serial_id(),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("actor", sa.Text),
    sa.Column("at", sa.Double, nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Index("durable_actions_run", "run_id", "id"),
)

# Version 6: outcomes an operator's retry erased (a run's failure, its failed task
# calls), kept for statistics: the history keeps only the latest attempt at a position.
attempts = sa.Table(
    "durable_attempts",
    metadata,
    _serial_id(),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),  # "run" or "task"
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("workflow", sa.Text, nullable=False),  # the run's workflow
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("started_at", sa.Double),
    sa.Column("finished_at", sa.Double),
    sa.Index("durable_attempts_run", "run_id"),
    sa.Index("durable_attempts_started", "kind", "started_at"),
)

# Version 10: schedules, a workflow run on a cron expression or at a fixed interval
# (`durable.core.schedules.Schedule`). Booleans are 0 or 1.
_LIVE_SCHEDULE = sa.text("paused = 0 AND orphaned = 0")
schedules = sa.Table(
    "durable_schedules",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("workflow", sa.Text, nullable=False),
    sa.Column("input", sa.LargeBinary, nullable=False),
    sa.Column("call_hash", sa.Text, nullable=False),
    sa.Column("cron", sa.Text),
    sa.Column("every", sa.Double),
    sa.Column("timezone", sa.Text, nullable=False),
    sa.Column("catch_up", sa.Text, nullable=False),
    sa.Column("max_catch_up", sa.Integer, nullable=False),
    sa.Column("overlap", sa.Text, nullable=False),
    sa.Column("queue", sa.Text, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("declared", sa.Integer, nullable=False),
    sa.Column("orphaned", sa.Integer, nullable=False),
    sa.Column("paused", sa.Integer, nullable=False),
    sa.Column("next_fire_at", sa.Double, nullable=False),
    sa.Column("last_fire_at", sa.Double),
    sa.Column("last_run_id", sa.Text),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("updated_at", sa.Double, nullable=False),
    # Added in version 11: until when a worker that took the schedule due holds it
    # (others skip it), released when it moves on.
    sa.Column("held_until", sa.Double),
    # Added in version 11: each tick's run starts up to this many seconds late (None: 0).
    sa.Column("jitter", sa.Double),
    # Workers find the schedules that are due, and the next one to come: those that
    # are neither paused nor orphaned, by next_fire_at.
    sa.Index(
        "durable_schedules_due",
        "next_fire_at",
        sqlite_where=_LIVE_SCHEDULE,
        postgresql_where=_LIVE_SCHEDULE,
    ),
)

# Version 11: the limits of queues (flow control), and the log of a rate's starts.
queues = sa.Table(
    "durable_queues",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("concurrency", sa.Integer),
    sa.Column("key_concurrency", sa.Integer),
    sa.Column("rate", sa.Integer),
    sa.Column("per", sa.Double),
    sa.Column("rate_log", sa.LargeBinary),
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.Column("key_rate", sa.Integer),
    sa.Column("key_per", sa.Double),
)

# Version 13: what runs are searched by (`durable.core.attributes`): a row per key, its
# canonical text (what filters match) and its type letter. The index finds a key's
# value's runs; the primary key reads one run's attributes.
run_attributes = sa.Table(
    "durable_run_attributes",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Index("durable_run_attributes_lookup", "key", "value", "run_id"),
    sqlite_with_rowid=False,
)

# Version 15: values runs write for live readers (`durable.core.streams`): a row per
# item, at offsets 0, 1, 2... per (run, stream); a close marker has no payload. ``seq``
# numbers a workflow's writes (the same on every replay): unique, so a replay or a
# retried write finds its item instead of writing it twice; task writes have none.
streams = sa.Table(
    "durable_streams",
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("stream", sa.Text, primary_key=True),
    sa.Column("stream_offset", sa.Integer, primary_key=True),
    sa.Column("seq", sa.Integer),
    sa.Column("payload", sa.LargeBinary),
    sa.Column("written_at", sa.Double, nullable=False),
    sa.Index(
        "durable_streams_seq",
        "run_id",
        "stream",
        "seq",
        unique=True,
        sqlite_where=sa.text("seq IS NOT NULL"),
        postgresql_where=sa.text("seq IS NOT NULL"),
    ),
    sqlite_with_rowid=False,
)

meta = sa.Table(
    "durable_meta",
    metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

_QUEUED = sa.text("status = 'queued'")
_HEARTBEATING = sa.text("status = 'running' AND wake_at IS NOT NULL")

_UNCONSUMED = events.c.consumed_position.is_(None)
_WAITING = sa.text("status = 'waiting'")
_KEYED = events.c.key.is_not(None)

# A wait consumes the oldest unconsumed event of one name sent to its run.
sa.Index(
    "durable_events_inbox",
    events.c.run_id,
    events.c.name,
    events.c.id,
    sqlite_where=_UNCONSUMED,
    postgresql_where=_UNCONSUMED,
)
# An event sent with a key is delivered once, however often it is sent.
sa.Index(
    "durable_events_key",
    events.c.run_id,
    events.c.key,
    unique=True,
    sqlite_where=_KEYED,
    postgresql_where=_KEYED,
)
# Workers wake sleeping runs whose time has come.
due_index = sa.Index(
    "durable_runs_due", runs.c.wake_at, sqlite_where=_WAITING, postgresql_where=_WAITING
)

# Workers claim the oldest, most urgent queued runs of their queues.
claim_index = sa.Index(
    "durable_runs_claim",
    runs.c.queue,
    runs.c.priority.desc(),
    runs.c.created_at,
    sqlite_where=_QUEUED,
    postgresql_where=_QUEUED,
)

# Version 5: a run's children. Partial: most runs have no parent, and an entry each
# would be one more b-tree page to write, and fsync, for every run created.
_HAS_PARENT = sa.text("parent_id IS NOT NULL")
parent_index = sa.Index(
    "durable_runs_parent",
    runs.c.parent_id,
    sqlite_where=_HAS_PARENT,
    postgresql_where=_HAS_PARENT,
)

# Version 8: task attempts that must heartbeat, whose runs the sweep looks at for a
# hung body (a RUNNING step's wake_at: the moment it counts as hung).
heartbeating_index = sa.Index(
    "durable_history_heartbeating",
    history.c.run_id,
    history.c.wake_at,
    sqlite_where=_HEARTBEATING,
    postgresql_where=_HEARTBEATING,
)

# Version 17: a status's runs, newest first (the runs list filtered by status), and
# the queued runs' queues and ages (the queues page), from the index alone.
status_created_index = sa.Index(
    "durable_runs_status_created", runs.c.status, runs.c.created_at, runs.c.queue
)
# Version 4: listing a workflow's runs, newest first (the dashboard, `durable ls`).
workflow_index = sa.Index("durable_runs_workflow", runs.c.workflow, runs.c.created_at)
# Version 4: a run's events, for `WaitStore.events` and purging.
events_run_index = sa.Index("durable_events_run", events.c.run_id)

# Version 11: the running runs of a key (a claim counts them), and the one debounced
# run of a workflow and key that has not started yet (dispatches coalesce into it).
_KEYED_RUN = sa.text("concurrency_key IS NOT NULL")
key_index = sa.Index(
    "durable_runs_key",
    runs.c.queue,
    runs.c.concurrency_key,
    runs.c.status,
    sqlite_where=_KEYED_RUN,
    postgresql_where=_KEYED_RUN,
)
# A key rate counts the key's runs first started inside its window.
key_starts_index = sa.Index(
    "durable_runs_key_starts",
    runs.c.queue,
    runs.c.concurrency_key,
    runs.c.started_at,
    sqlite_where=_KEYED_RUN,
    postgresql_where=_KEYED_RUN,
)
_DEBOUNCING = sa.text("debounce_key IS NOT NULL")
debounce_index = sa.Index(
    "durable_runs_debounce",
    runs.c.workflow,
    runs.c.debounce_key,
    unique=True,
    sqlite_where=_DEBOUNCING,
    postgresql_where=_DEBOUNCING,
)

#: The schema version this code reads and writes.
SCHEMA_VERSION = 20

Execute = Callable[[str], None]


def create(dialect: sa.Dialect, execute: Execute) -> None:
    """Create every table and index at the current version (a new database)."""
    for table in (
        runs,
        history,
        events,
        actions,
        attempts,
        schedules,
        queues,
        run_attributes,
        streams,
        meta,
    ):
        create_table(table, dialect, execute)


def create_table(table: sa.Table, dialect: sa.Dialect, execute: Execute) -> None:
    """*table* and its indexes, if they do not exist yet."""
    execute(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)))
    for index in sorted(table.indexes, key=lambda i: str(i.name)):
        execute(str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)))
