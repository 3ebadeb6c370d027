"""What the model and the backends are compared by: the ids, times and queues the
machine uses, the answer of a refused call (`Raised`), and a backend's observable state
(`Dump`, its runs as `RunView`s).

Chains: a run continued (`continue_run`) hands over to ``<id>~1``, that one to
``<id>~2``... (`durable.core.chains`). Only the links in LINKS are observed, so the
machine continues a run only where its successor's id is one of them; a fork takes
FORK, or else an id of RUN_IDS no run has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from durable.core.events import Event
from durable.core.queues import Queue
from durable.core.records import RunStatus, Step

#: The ids runs are created with, and one no run ever has.
RUN_IDS = ("r0", "r1", "r2", "r3", "r4")
GHOST = "ghost"
#: The successors a chain may have (r1 is r0's child: it never continues), and the id
#: forks take first. Each costs a `get_run` per observation while no run has it: few.
LINKS = ("r0~1", "r0~2", "r2~1")
FORK = "f0"
OBSERVED = (*RUN_IDS, *LINKS, FORK, GHOST)
#: Leases that cannot run out during a test, and the one expiry sets (a minute ago).
LEASE = 3600.0
EXPIRED = -60.0
#: Timers that are over at once, and timers never due during a test.
PAST = -60.0
FAR = 3600.0

#: The prefix of ``waiting_on`` for a run that any event wakes (a class with on_event).
ANY_EVENT = "events|"
#: The period of every rate: no start leaves the window during a test.
PER = 3600.0
#: The queues the machine uses, and one it never declares nor creates runs in.
QUEUE_NAMES = ("default", "mail", "other")


@dataclass(frozen=True, slots=True)
class Raised:
    """The answer of a call that raised one of the contract's errors."""

    error: str
    run_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """What can be observed of a run, without times: they are judged against now."""

    workflow: str
    input: bytes
    call_hash: str
    parent: str | None
    queue: str
    priority: int
    status: RunStatus
    epoch: int
    owner: str | None
    #: "live", "expired", or None without a lease.
    lease: str | None
    recoveries: int
    cancel: bool
    #: `Run.pause_requested`: asked to pause while RUNNING (kept until parked or resumed).
    pause: bool = False
    output: bytes | None = None
    error: bytes | None = None
    started: bool
    finished: bool = False
    #: "due", "later", or None without a timer.
    wake: str | None = None
    waiting_on: str | None = None
    #: the run's timeout: its deadline less its creation (to the millisecond), or None.
    timeout: float | None = None
    #: the properties snapshot its end stored (`Run.state`).
    state: bytes | None = None
    #: flow control: `Run.key`, `Run.key_limit`.
    key: str | None = None
    key_limit: int | None = None
    #: code versions: `Run.version` (stamped by a first claim), `Run.origin` (a fork's).
    version: str | None = None
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class Dump:
    """The observable state of a backend: every run of OBSERVED and what it holds."""

    runs: dict[str, RunView | None]
    #: steps with event ids in their input replaced by sending order (see `view_step`).
    history: dict[str, tuple[Step, ...]]
    #: events with their place in the sending order of all observed events as id, and
    #: sent_at 0.
    events: dict[str, tuple[Event, ...]]
    #: host -> ids of runs `recoverable(host=...)` lists, sorted.
    recoverable: dict[str, tuple[str, ...]]
    #: queue (or "*" for every queue) -> `queued_workflows`.
    queued_workflows: dict[str, tuple[str, ...]]
    #: `next_wake`: None, "due" (zero or negative) or "later".
    next_wake: str | None
    #: run -> `state(run_id)`: its latest properties snapshot.
    published: dict[str, tuple[bytes | None] | None]
    #: `list_queues` (each also `get_queue` by name).
    queues: tuple[Queue, ...] = ()
    #: queue -> `next_start`: None (no rate), "now" (0.0) or "later".
    next_start: dict[str, str | None] = field(default_factory=dict)
    #: `queue_usage`: (name, queued, running, running per key), the oldest time left out.
    usage: tuple[tuple[str, int, int, dict[str, int]], ...] = ()


#: The hosts `recoverable` is asked about: one with owners (h1:...), one without.
HOSTS = ("h1", "h3")
#: The queue lists `queued_workflows` is asked about.
QUEUE_SETS = {"default": ("default",), "*": ("default", "mail")}
