"""What the state machine draws its steps from: owners, queues, workflows, event names,
concurrency keys, code versions, priorities, stale epochs, reopening points and waits;
and the nap rule's timer (NAP, MAX_NAPS) and the successor id `create` may take first
(TAKEN)."""

from __future__ import annotations

from hypothesis import strategies as st

from durable.core.run_options import PRIORITY_MAX, PRIORITY_MIN

OWNERS = ("h1:1:a", "h1:2:b", "h2:1:c")
#: An owner that never holds a lease: named dead, it must not let anyone take a run.
STRANGER = "h3:9:z"
QUEUES = ("default", "mail")
WORKFLOWS = ("wf.a", "wf.b")
EVENT_NAMES = ("go", "stop")
#: Concurrency keys: runs of a key share its limit.
KEYS = ("k1", "k2")
#: How far away a napping run's timer is, in seconds. The nap rule sleeps that long.
NAP = 0.1
#: Naps per example: each one sleeps NAP seconds.
MAX_NAPS = 2
#: A successor's id that `create` may take first (as before such ids were reserved).
TAKEN = "r2~1"
#: Code versions of created runs and of claimers.
VERSION = st.sampled_from((None, None, "v1", "v2"))

OWNER = st.sampled_from(OWNERS)
#: Priorities: small ones that tie often, and the ends of the int4 range they must fit.
PRIORITY = st.sampled_from((0, 1, 2, PRIORITY_MIN, PRIORITY_MAX))
#: The epoch a call passes, relative to the run's: mostly its own, sometimes a stale one.
SHIFT = st.sampled_from((0, 0, 0, 0, 0, -1, 1))
#: Where `resume` reopens a cancelled run (`drop_from`): nowhere (None), at its first
#: position, its last, past its end, or at the first position that consumed an event.
DROP = st.sampled_from((None, None, "start", "last", "past", "an event"))
#: What a suspending run waits for, besides its timer (see `_waiting_on`); prefixed
#: "events|", any event ends the wait too (a workflow class with on_event).
WAITING_ON = st.sampled_from(
    (
        "its child",
        "its child",
        "event:go",
        "event:stop",
        "a run",
        "nothing",
        "events|its child",
        "events|its child",
        "events|event:go",
        "events|nothing",
    )
)
